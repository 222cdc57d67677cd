package usage_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/usage"
)

// TestRecorderRaisesAnomalies: what Record buffers is enough to notice a
// key's new network and spike when the recorder flushes (docs/webhooks.md,
// Key anomalies): 8 days of a key's requests, recorded with their own past
// times and flushed a day at a time, then a request from a new /24 and a
// burst of 1,200 requests.
func TestRecorderRaisesAnomalies(t *testing.T) {
	st := storetest.Open(t, store.EngineSQLite)
	ctx := context.Background()
	acct := storetest.Account(t, st)
	k := storetest.Key(t, st, acct.ID)
	rec := usage.New(st, nil, usage.Options{})
	n := 0
	record := func(at time.Time, client string) {
		n++
		rec.Record(requestlog.Log{ID: fmt.Sprintf("req_%06d", n), AccountID: acct.ID, KeyID: k.ID, At: at,
			Method: "GET", Route: "GET /v1/me", Path: "/v1/me", Status: 200, Client: client})
	}
	flush := func() {
		t.Helper()
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for d := range 8 {
		for h := range 24 {
			record(storetest.T0.Add(time.Duration(d*24+h)*time.Hour), "203.0.113.7")
		}
		flush()
	}
	now := storetest.T0.Add(8*24*time.Hour + 30*time.Minute)
	record(now, "198.51.100.9")
	for range 1200 {
		record(now.Add(time.Second), "203.0.113.7")
	}
	flush()
	evs, err := st.ListEvents(ctx, store.EventQuery{AccountID: acct.ID, Limit: 10, Types: []string{string(domain.EventKeyAnomaly)}})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, ev := range evs {
		reasons = append(reasons, regexpReason(string(ev.Extra)))
	}
	if got := strings.Join(reasons, " "); got != "spike new_network" {
		t.Errorf("anomalies %q, want a spike and a new network", got)
	}
}

func regexpReason(extra string) string {
	_, rest, _ := strings.Cut(extra, `"reason":"`)
	r, _, _ := strings.Cut(rest, `"`)
	return r
}
