package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/wire"
)

// The anomaly tests seed a key's history from storetest.T0 through the
// usage flush itself (WriteUsage, with the logs' own past times), then
// write what the flush would write next, from two instances at once.

const seedClient = "203.0.113.7"

// seedHistory writes days of a key's traffic from T0, a flush a day: a
// successful request from seedClient every hour, and perBucket requests
// counted in each 10-minute bucket's first minute.
func seedHistory(t *testing.T, s *store.Store, k domain.APIKey, days int, perBucket int64) {
	t.Helper()
	seedHistoryFrom(t, s, k, storetest.T0, days, perBucket)
}

func seedHistoryFrom(t *testing.T, s *store.Store, k domain.APIKey, from time.Time, days int, perBucket int64) {
	t.Helper()
	for d := range days {
		day := from.Add(time.Duration(d) * 24 * time.Hour)
		var logs []requestlog.Log
		var counts []store.UsageCount
		for h := range 24 {
			logs = append(logs, anomalyLog(k, day.Add(time.Duration(h)*time.Hour), seedClient, 200))
		}
		for b := range 144 {
			counts = append(counts, store.UsageCount{AccountID: k.AccountID, KeyID: k.ID, Class: requestlog.Class2xx,
				Minute: day.Add(time.Duration(b) * 10 * time.Minute), Count: perBucket})
		}
		if err := s.WriteUsage(context.Background(), logs, counts); err != nil {
			t.Fatal(err)
		}
	}
}

var logSeq int

func anomalyLog(k domain.APIKey, at time.Time, client string, status int) requestlog.Log {
	logSeq++
	return requestlog.Log{ID: fmt.Sprintf("req_%08d", logSeq), AccountID: k.AccountID, KeyID: k.ID, At: at,
		Method: "GET", Route: "GET /v1/me", Path: "/v1/me", Status: status, Duration: time.Millisecond, Client: client}
}

// bothWrite runs write on a and b at once.
func bothWrite(t *testing.T, a, b *store.Store, write func(s *store.Store) error) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range []*store.Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := write(s); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

// anomalyEvent is an api_key.anomaly as the checks read it.
type anomalyEvent struct {
	Reason  string         `json:"reason"`
	Details map[string]any `json:"details"`
	KeyID   string
}

func anomalies(t *testing.T, s *store.Store, accountID string) []anomalyEvent {
	t.Helper()
	evs, err := s.ListEvents(context.Background(), store.EventQuery{AccountID: accountID, Limit: 100,
		Types: []string{string(domain.EventKeyAnomaly)}})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]anomalyEvent, len(evs))
	for i, ev := range evs {
		if err := json.Unmarshal(ev.Extra, &out[i]); err != nil {
			t.Fatalf("event %s extra %s: %v", ev.ID, ev.Extra, err)
		}
		var data struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			t.Fatal(err)
		}
		out[i].KeyID = data.ID
	}
	return out
}

// expectAnomalies checks that the events since seen are want's reasons,
// and returns how many there are now.
func expectAnomalies(t *testing.T, s *store.Store, accountID string, seen int, step string, want ...string) ([]anomalyEvent, int) {
	t.Helper()
	all := anomalies(t, s, accountID)
	got := all[seen:]
	if len(got) != len(want) {
		t.Fatalf("%s: %d new anomalies %+v, want %v", step, len(got), got, want)
	}
	for i, w := range want {
		if got[i].Reason != w {
			t.Errorf("%s: anomaly %d is %q, want %q", step, i, got[i].Reason, w)
		}
	}
	return got, len(all)
}

func writeLogs(ctx context.Context, logs ...requestlog.Log) func(s *store.Store) error {
	return func(s *store.Store) error { return s.WriteUsage(ctx, logs, nil) }
}

// TestAnomalyNewNetwork: a successful request from an IPv4 /24 or IPv6 /48
// not seen for the key in 30 days raises new_network, once the key has 7
// days of history, at most once a day, once for two instances.
func TestAnomalyNewNetwork(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		a, b := storetest.OpenTwo(t, engine)
		ctx := context.Background()
		acct := storetest.Account(t, a)
		k := storetest.Key(t, a, acct.ID)
		young := storetest.Key(t, a, acct.ID)
		seedHistory(t, a, k, 8, 20)
		seedHistoryFrom(t, a, young, storetest.T0.Add(5*24*time.Hour), 3, 20)
		now := storetest.T0.Add(8*24*time.Hour + time.Hour)
		seen := 0
		step := func(what string, l requestlog.Log, want ...string) []anomalyEvent {
			t.Helper()
			bothWrite(t, a, b, writeLogs(ctx, l))
			got, n := expectAnomalies(t, a, acct.ID, seen, what, want...)
			seen = n
			return got
		}
		step("the /24 it knows", anomalyLog(k, now, "203.0.113.200", 200))
		step("a refused request", anomalyLog(k, now, "198.51.100.7", 403))
		step("too little history", anomalyLog(young, now, "198.51.100.7", 200))
		got := step("a new /24", anomalyLog(k, now.Add(time.Minute), "198.51.100.7", 200), store.AnomalyNewNetwork)
		if got[0].KeyID != k.ID || got[0].Details["network"] != "198.51.100.0/24" || got[0].Details["address"] != "198.51.100.7" {
			t.Errorf("new network event %+v", got[0])
		}
		step("the new /24 again", anomalyLog(k, now.Add(time.Hour), "198.51.100.8", 200))
		step("another /24 within 24 h", anomalyLog(k, now.Add(2*time.Hour), "192.0.2.1", 200))
		got = step("a new /48 a day later", anomalyLog(k, now.Add(25*time.Hour), "2001:db8:1::5", 200), store.AnomalyNewNetwork)
		if got[0].Details["network"] != "2001:db8:1::/48" {
			t.Errorf("IPv6 network %v", got[0].Details["network"])
		}
		step("the same /48 a day later", anomalyLog(k, now.Add(50*time.Hour), "2001:db8:1:ffff::1", 200))
		step("another /48", anomalyLog(k, now.Add(51*time.Hour), "2001:db8:2::1", 200), store.AnomalyNewNetwork)
		checkAnomalyAudit(t, a, acct.ID, k.ID, 3)
	})
}

// checkAnomalyAudit checks the key's trail holds n anomaly entries by the
// system.
func checkAnomalyAudit(t *testing.T, s *store.Store, accountID, keyID string, n int) {
	t.Helper()
	evs, err := s.ListKeyAuditEvents(context.Background(), accountID, keyID)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, ev := range evs {
		if ev.Action == domain.AuditAnomaly {
			got++
			if ev.Actor != store.AnomalyActor || ev.Detail == "" {
				t.Errorf("anomaly audit entry %+v", ev)
			}
		}
	}
	if got != n {
		t.Errorf("%d anomaly audit entries, want %d", got, n)
	}
}

// TestAnomalyNetworkForgotten: a network last seen over 30 days before is
// new again.
func TestAnomalyNetworkForgotten(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		s := storetest.Open(t, engine)
		ctx := context.Background()
		acct := storetest.Account(t, s)
		k := storetest.Key(t, s, acct.ID)
		seedHistory(t, s, k, 8, 20)
		day8 := storetest.T0.Add(8 * 24 * time.Hour)
		if err := s.WriteUsage(ctx, []requestlog.Log{anomalyLog(k, day8, "198.51.100.1", 200)}, nil); err != nil {
			t.Fatal(err)
		}
		_, seen := expectAnomalies(t, s, acct.ID, 0, "new", store.AnomalyNewNetwork)
		// The key keeps using its usual network; 31 days later the other
		// comes back.
		later := day8.Add(31 * 24 * time.Hour)
		for _, l := range []requestlog.Log{
			anomalyLog(k, day8.Add(10*24*time.Hour), seedClient, 200),
			anomalyLog(k, day8.Add(20*24*time.Hour), seedClient, 200),
			anomalyLog(k, later.Add(-time.Hour), seedClient, 200),
			anomalyLog(k, later, "198.51.100.2", 200),
		} {
			if err := s.WriteUsage(ctx, []requestlog.Log{l}, nil); err != nil {
				t.Fatal(err)
			}
		}
		expectAnomalies(t, s, acct.ID, seen, "back after 31 days", store.AnomalyNewNetwork)
	})
}

func writeCounts(ctx context.Context, k domain.APIKey, at time.Time, n int64) func(s *store.Store) error {
	return func(s *store.Store) error {
		return s.WriteUsage(ctx, nil, []store.UsageCount{{AccountID: k.AccountID, KeyID: k.ID, Class: requestlog.Class2xx,
			Minute: at, Count: n}})
	}
}

// TestAnomalySpike: a 10-minute bucket of at least 10 times the key's
// median of the last 7 days and at least 1,000 raises spike, once a day,
// once for two instances.
func TestAnomalySpike(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		a, b := storetest.OpenTwo(t, engine)
		ctx := context.Background()
		acct := storetest.Account(t, a)
		quiet := storetest.Key(t, a, acct.ID)
		busy := storetest.Key(t, a, acct.ID)
		seedHistory(t, a, quiet, 8, 20)
		seedHistory(t, a, busy, 8, 150)
		bucket := storetest.T0.Add(8*24*time.Hour + 20*time.Minute)
		seen := 0
		step := func(what string, k domain.APIKey, at time.Time, n int64, want ...string) []anomalyEvent {
			t.Helper()
			bothWrite(t, a, b, writeCounts(ctx, k, at, n))
			got, all := expectAnomalies(t, a, acct.ID, seen, what, want...)
			seen = all
			return got
		}
		step("under 1,000", quiet, bucket, 499)
		got := step("a burst", quiet, bucket.Add(time.Minute), 600, store.AnomalySpike)
		if got[0].KeyID != quiet.ID || got[0].Details["median"] != 20.0 || got[0].Details["count"].(float64) < 1000 {
			t.Errorf("spike event %+v", got[0])
		}
		step("the burst goes on", quiet, bucket.Add(2*time.Minute), 5000)
		step("the next bucket, within 24 h", quiet, bucket.Add(10*time.Minute), 3000)
		// busy's median is 150: 1,500 is the threshold, not 1,000.
		step("busy under 10 times", busy, bucket, 700)
		step("busy at 10 times", busy, bucket.Add(time.Minute), 50, store.AnomalySpike)
		checkAnomalyAudit(t, a, acct.ID, quiet.ID, 1)
	})
}

// TestAnomalySpikeAfterADay: the next spike a day later is raised again,
// and its notice shows again after it was dismissed.
func TestAnomalySpikeAfterADay(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		s := storetest.Open(t, engine)
		ctx := context.Background()
		acct := storetest.Account(t, s)
		k := storetest.Key(t, s, acct.ID)
		bucket := storetest.T0.Add(time.Hour)
		for i, at := range []time.Time{bucket, bucket.Add(23 * time.Hour), bucket.Add(24 * time.Hour)} {
			if err := writeCounts(ctx, k, at, 1000)(s); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				dismissOnly(t, s, k)
			}
		}
		expectAnomalies(t, s, acct.ID, 0, "three bursts", store.AnomalySpike, store.AnomalySpike)
		notices, err := s.KeyAnomalies(ctx, acct.ID, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(notices) != 1 || notices[0].Reason != store.AnomalySpike || !notices[0].SeenAt.Equal(bucket.Add(24*time.Hour)) {
			t.Errorf("notices %+v, want the second spike's", notices)
		}
	})
}

// dismissOnly dismisses the key's one notice, and checks that a second
// dismissal finds none.
func dismissOnly(t *testing.T, s *store.Store, k domain.APIKey) {
	t.Helper()
	ctx := context.Background()
	notices, err := s.KeyAnomalies(ctx, k.AccountID, k.ID, 10)
	if err != nil || len(notices) != 1 {
		t.Fatalf("notices %+v, %v", notices, err)
	}
	n := notices[0]
	ev := storetest.Event(k.AccountID, k.ID, domain.AuditNoticeDismissed, storetest.T0.Add(2*time.Hour))
	if err := s.DismissKeyAnomaly(ctx, k.AccountID, k.ID, n.Reason, n.EventID, ev); err != nil {
		t.Fatal(err)
	}
	if err := s.DismissKeyAnomaly(ctx, k.AccountID, k.ID, n.Reason, n.EventID, ev); err != domain.ErrNotFound {
		t.Errorf("second dismissal: %v, want ErrNotFound", err)
	}
	if notices, _ := s.KeyAnomalies(ctx, k.AccountID, k.ID, 10); len(notices) != 0 {
		t.Errorf("dismissed notice still listed: %+v", notices)
	}
}

// TestAnomalyAfterIdle: a use after 30 days unused (or never used since
// created over 30 days before) raises after_idle, once, whichever of two
// instances writes last_used_at first.
func TestAnomalyAfterIdle(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		a, b := storetest.OpenTwo(t, engine)
		ctx := context.Background()
		acct := storetest.Account(t, a)
		used := storetest.Key(t, a, acct.ID)
		never := storetest.Key(t, a, acct.ID)
		recent := storetest.Key(t, a, acct.ID)
		touch := func(at time.Time, ids ...string) {
			t.Helper()
			m := map[string]time.Time{}
			for i, id := range ids {
				m[id] = at.Add(time.Duration(i) * time.Millisecond)
			}
			bothWrite(t, a, b, func(s *store.Store) error { return s.TouchKeys(ctx, m) })
		}
		touch(storetest.T0.Add(time.Hour), used.ID)
		touch(storetest.T0.Add(20*24*time.Hour), recent.ID)
		back := storetest.T0.Add(time.Hour + 31*24*time.Hour)
		touch(back, used.ID, never.ID, recent.ID)
		got, seen := expectAnomalies(t, a, acct.ID, 0, "back after 31 days", store.AnomalyAfterIdle, store.AnomalyAfterIdle)
		byKey := map[string]anomalyEvent{got[0].KeyID: got[0], got[1].KeyID: got[1]}
		if d := byKey[used.ID].Details; d["last_used_at"] != storetest.T0.Add(time.Hour).Format(wire.TimeFormat) || d["idle_days"] != 31.0 {
			t.Errorf("after_idle of the used key: %+v", d)
		}
		if d, ok := byKey[never.ID]; !ok || d.Details["last_used_at"] != nil {
			t.Errorf("after_idle of the never used key: %+v", d)
		}
		touch(back.Add(time.Minute), used.ID, never.ID)
		expectAnomalies(t, a, acct.ID, seen, "used again")
		checkAnomalyAudit(t, a, acct.ID, used.ID, 1)
	})
}

// TestAnomalyRevokedKey: a revoked key raises nothing.
func TestAnomalyRevokedKey(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		s := storetest.Open(t, engine)
		ctx := context.Background()
		acct := storetest.Account(t, s)
		k := storetest.Key(t, s, acct.ID)
		if err := s.RevokeKey(ctx, acct.ID, k.ID, "usr_1", storetest.T0, storetest.Event(acct.ID, k.ID, domain.AuditRevoked, storetest.T0)); err != nil {
			t.Fatal(err)
		}
		if err := writeCounts(ctx, k, storetest.T0.Add(time.Hour), 5000)(s); err != nil {
			t.Fatal(err)
		}
		if err := s.TouchKeys(ctx, map[string]time.Time{k.ID: storetest.T0.Add(40 * 24 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		expectAnomalies(t, s, acct.ID, 0, "revoked")
	})
}

// TestAnomalyStateSwept: the usage sweep drops buckets older than 7 days
// and networks unseen for 30, so a key's state stays bounded.
func TestAnomalyStateSwept(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		s := storetest.Open(t, engine)
		ctx := context.Background()
		acct := storetest.Account(t, s)
		k := storetest.Key(t, s, acct.ID)
		seedHistory(t, s, k, 2, 5)
		if err := s.WriteUsage(ctx, []requestlog.Log{anomalyLog(k, storetest.T0.Add(9*24*time.Hour), "198.51.100.1", 200)}, nil); err != nil {
			t.Fatal(err)
		}
		check := func(at time.Time, buckets, networks int) {
			t.Helper()
			if err := s.SweepUsage(ctx, at); err != nil {
				t.Fatal(err)
			}
			b, n, err := s.AnomalyState(ctx, k.ID)
			if err != nil {
				t.Fatal(err)
			}
			if b != buckets || n != networks {
				t.Errorf("after the sweep at %s: %d buckets, %d networks, want %d and %d", at, b, n, buckets, networks)
			}
		}
		check(storetest.T0.Add(8*24*time.Hour+10*time.Minute), 144, 2)
		check(storetest.T0.Add(32*24*time.Hour), 0, 1)
		check(storetest.T0.Add(40*24*time.Hour), 0, 0)
	})
}
