package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/wire"
)

// Key anomalies (docs/webhooks.md, Key anomalies). They are noticed in the
// background, from what is written anyway: the usage flush's logs and
// counts (WritePackedUsage) find new networks and spikes, the last_used_at
// write-behind (TouchKeys) finds a use after an idle month. Times are the
// requests' own. Each is raised at most once per key and reason within
// AnomalyRepeat, decided by key_anomalies' primary key in a conditional
// upsert (migration 0015), so that however many instances notice the same
// thing, one event is written; its audit entry and event commit with it.

// Anomaly reasons, as api_key.anomaly's reason says them.
const (
	AnomalyNewNetwork = "new_network"
	AnomalySpike      = "spike"
	AnomalyAfterIdle  = "after_idle"
)

// Anomaly thresholds.
const (
	// AnomalyRepeat: a key's anomaly of one reason is raised at most once
	// in this time.
	AnomalyRepeat = 24 * time.Hour
	// NetworkWindow: a network not seen for a key in this time is new, and
	// NetworkHistory is how long before a request the key's oldest network
	// still remembered must have been first seen for it to count.
	NetworkWindow  = 30 * 24 * time.Hour
	NetworkHistory = 7 * 24 * time.Hour
	// A spike: a SpikeBucket of a key's requests at least SpikeFactor
	// times the median of its buckets in the SpikeWindow before, empty
	// ones counting as zero, and at least SpikeFloor.
	SpikeBucket = 10 * time.Minute
	SpikeWindow = 7 * 24 * time.Hour
	SpikeFactor = 10
	SpikeFloor  = 1000
	// IdleAfter: a use after this long unused is after_idle.
	IdleAfter = 30 * 24 * time.Hour
)

// AnomalyActor is who an anomaly's audit entry and event name.
const AnomalyActor = "system"

// anomaly is one thing noticed about a key, before it is claimed.
type anomaly struct {
	keyID, reason string
	at            time.Time // when the requests showed it: the 24 h are counted from here
	details       any       // the event's details, a JSON object
	detail        string    // the audit entry's words
}

// raiseAnomaly claims (a.keyID, a.reason) at a.at and, when this call made
// the claim (none within AnomalyRepeat before), writes the audit entry and
// records the api_key.anomaly event, in tx. A key gone or revoked gets
// nothing.
func (tx *Tx) raiseAnomaly(ctx context.Context, a anomaly) error {
	k, err := scanKey(tx.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys k WHERE k.id = $1`, a.keyID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get key: %w", err)
	}
	if k.RevokedAt != nil {
		return nil
	}
	details, err := json.Marshal(a.details)
	if err != nil {
		return fmt.Errorf("encode anomaly details: %w", err)
	}
	evID := domain.NewID(domain.PrefixEvent, a.at)
	var claimed string
	err = tx.QueryRowContext(ctx, `INSERT INTO key_anomalies (key_id, reason, account_id, event_id, details, seen_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (key_id, reason) DO UPDATE SET event_id = excluded.event_id, details = excluded.details,
			seen_at = excluded.seen_at, dismissed_at = NULL, dismissed_by = ''
		WHERE key_anomalies.seen_at <= $7
		RETURNING event_id`, k.ID, a.reason, k.AccountID, evID, string(details), toMS(a.at),
		toMS(a.at.Add(-AnomalyRepeat))).Scan(&claimed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // raised within the last 24 h, here or by another instance
	}
	if err != nil {
		return fmt.Errorf("claim key anomaly: %w", err)
	}
	audit := domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, a.at), AccountID: k.AccountID, KeyID: k.ID,
		Action: domain.AuditAnomaly, Actor: AnomalyActor, Detail: a.detail, CreatedAt: a.at}
	if err := insertKeyEvent(ctx, tx, audit); err != nil {
		return err
	}
	extra := map[string]any{"reason": a.reason, "details": json.RawMessage(details)}
	if err := tx.recordKey(ctx, k, domain.EventKeyAnomaly, nil, extra, nil,
		&domain.EventActor{Type: "system", ID: "anomaly"}); err != nil {
		return err
	}
	tx.events[len(tx.events)-1].ID = evID // the notice names its event
	return nil
}

// flushLearnt is what a usage flush learnt for its instance to remember
// once it commits.
type flushLearnt struct {
	spikes map[string]spikeMemo
	nets   map[keyNetwork]int64
}

// detectAnomalies notices, in the usage flush's transaction, the new
// networks of logs and the spikes of counts.
func (s *Store) detectAnomalies(ctx context.Context, tx *Tx, logs *requestlog.Buffer, counts []UsageCount) (flushLearnt, error) {
	var l flushLearnt
	var err error
	if l.spikes, err = s.checkSpikes(ctx, tx, counts); err != nil {
		return l, err
	}
	l.nets, err = s.checkNetworks(ctx, tx, networksOf(logs))
	return l, err
}

// pruneAnomalyState drops what detection no longer needs as of now:
// buckets older than the spike window, networks unseen for NetworkWindow,
// and notices dismissed long ago (part of the usage sweep).
func pruneAnomalyState(ctx context.Context, tx *Tx, now time.Time) error {
	for _, q := range []struct {
		sql string
		arg int64
	}{
		{`DELETE FROM key_buckets WHERE bucket < $1`, toMS(now.Add(-SpikeWindow - SpikeBucket))},
		{`DELETE FROM key_networks WHERE last_seen < $1`, toMS(now.Add(-NetworkWindow))},
		{`DELETE FROM key_anomalies WHERE dismissed_at IS NOT NULL AND seen_at < $1`, toMS(now.Add(-NetworkWindow))},
	} {
		if _, err := tx.ExecContext(ctx, q.sql, q.arg); err != nil {
			return fmt.Errorf("sweep anomaly state: %w", err)
		}
	}
	return nil
}

// ---- new_network

// netSeen is a key's newest successful request from one network in a
// batch.
type netSeen struct {
	keyID, network, addr string
	at                   int64 // Unix ms
}

// networkOf is the /24 (IPv4) or /48 (IPv6) an address is in, as text;
// false for what is not an address.
func networkOf(client string) (string, bool) {
	a, err := netip.ParseAddr(client)
	if err != nil {
		return "", false
	}
	a = a.Unmap().WithZone("")
	bits := 48
	if a.Is4() {
		bits = 24
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return "", false
	}
	return p.String(), true
}

// networksOf is, per key and network, the newest successful (below 400)
// request of logs, in key and network order (the order every instance
// writes them in: no deadlock between two).
func networksOf(logs *requestlog.Buffer) []netSeen {
	if logs == nil {
		return nil
	}
	t := netTally{newest: map[keyNetwork]netSeen{}, nets: map[string]string{}}
	for _, b := range logs.Batches() {
		if b.KeyID != "" && b.Classes&requestlog.ClassBit(requestlog.Class2xx) != 0 {
			t.add(b)
		}
	}
	out := make([]netSeen, 0, len(t.newest))
	for _, v := range t.newest {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b netSeen) int {
		return cmp.Or(strings.Compare(a.keyID, b.keyID), strings.Compare(a.network, b.network))
	})
	return out
}

type keyNetwork struct{ key, network string }

// netTally gathers networksOf's answer, batch by batch.
type netTally struct {
	newest map[keyNetwork]netSeen
	nets   map[string]string // client → network, parsed once a flush
	d      requestlog.Decoder
	p      requestlog.Packed
}

// add tallies a batch (one key, one second). A batch's logs mostly come
// from one client: a run of one client is tallied once, at its newest.
func (t *netTally) add(b requestlog.Batch) {
	t.d.Reset(b.Blob, b.Sec)
	run, runAt := "", int64(-1)
	for t.d.Next(&t.p) {
		at, status, client := t.p.Seen()
		if status >= 400 {
			continue
		}
		if client != run {
			t.note(b.KeyID, run, runAt)
			run, runAt = client, at
		}
		runAt = max(runAt, at)
	}
	t.note(b.KeyID, run, runAt)
}

// note tallies key's request from client at `at` (none when at < 0).
func (t *netTally) note(keyID, client string, at int64) {
	if at < 0 {
		return
	}
	n, ok := t.nets[client]
	if !ok {
		n, _ = networkOf(client)
		t.nets[client] = n
	}
	if n == "" {
		return
	}
	k := keyNetwork{keyID, n}
	if old, ok := t.newest[k]; !ok || at > old.at {
		t.newest[k] = netSeen{keyID: keyID, network: n, addr: client, at: at}
	}
}

// netFresh is how stale a key network's stored last_seen may be: an
// instance that wrote it this recently skips the write (netCache), so a
// key polling from one network costs a write an hour, not a second.
const netFresh = time.Hour

// netCache is the key networks an instance wrote, with the last_seen it
// wrote: bounded, it starts over when full.
type netCache struct {
	mu sync.Mutex
	m  map[keyNetwork]int64
}

const netCacheSize = 100_000

func (c *netCache) fresh(k keyNetwork, at int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen, ok := c.m[k]
	return ok && seen >= at-netFresh.Milliseconds()
}

func (c *netCache) keep(learnt map[keyNetwork]int64) {
	if len(learnt) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m)+len(learnt) > netCacheSize {
		c.m = make(map[keyNetwork]int64, len(learnt))
	}
	for k, at := range learnt {
		c.m[k] = max(c.m[k], at)
	}
}

// checkNetworks records each network seen and raises new_network for one
// not seen for its key in NetworkWindow, once the key's oldest network
// still remembered was first seen NetworkHistory before. It returns what
// it wrote. A network this instance wrote within netFresh is not new and
// is not written again: its last_seen lags by at most that.
func (s *Store) checkNetworks(ctx context.Context, tx *Tx, seen []netSeen) (map[keyNetwork]int64, error) {
	wrote := map[keyNetwork]int64{}
	for _, n := range seen {
		k := keyNetwork{n.keyID, n.network}
		if s.nets.fresh(k, n.at) {
			continue
		}
		wrote[k] = n.at
		// first_seen comes back as this request's time when the network
		// is new: never seen, or unseen for the window (then it starts
		// again). No row comes back when a later request is stored.
		var first int64
		err := tx.QueryRowContext(ctx, `INSERT INTO key_networks (key_id, network, first_seen, last_seen) VALUES ($1, $2, $3, $3)
			ON CONFLICT (key_id, network) DO UPDATE SET last_seen = excluded.last_seen,
				first_seen = CASE WHEN key_networks.last_seen < $4 THEN excluded.first_seen ELSE key_networks.first_seen END
			WHERE key_networks.last_seen < excluded.last_seen
			RETURNING first_seen`, n.keyID, n.network, n.at, n.at-NetworkWindow.Milliseconds()).Scan(&first)
		if errors.Is(err, sql.ErrNoRows) || err == nil && first != n.at {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("record key network: %w", err)
		}
		if err := newNetwork(ctx, tx, n); err != nil {
			return nil, err
		}
	}
	return wrote, nil
}

// newNetwork raises new_network for n when the key has NetworkHistory of
// history: its oldest other network seen within the window was first seen
// that long before.
func newNetwork(ctx context.Context, tx *Tx, n netSeen) error {
	var since sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT MIN(first_seen) FROM key_networks
		WHERE key_id = $1 AND network <> $2 AND last_seen >= $3`,
		n.keyID, n.network, n.at-NetworkWindow.Milliseconds()).Scan(&since); err != nil {
		return fmt.Errorf("key history: %w", err)
	}
	if !since.Valid || since.Int64 > n.at-NetworkHistory.Milliseconds() {
		return nil
	}
	at := fromMS(n.at)
	return tx.raiseAnomaly(ctx, anomaly{keyID: n.keyID, reason: AnomalyNewNetwork, at: at,
		details: map[string]any{"network": n.network, "address": n.addr, "seen_at": at.UTC().Format(wire.TimeFormat),
			"known_since": fromMS(since.Int64).UTC().Format(wire.TimeFormat)},
		detail: "a successful request from " + n.addr + ", in " + n.network + ", a network new to the key"})
}

// ---- spike

// spikeMemo is what an instance knows of a key's current bucket: its
// threshold (the median's SpikeFactor times, at least SpikeFloor), read
// once a bucket, and whether the bucket was raised already.
type spikeMemo struct {
	bucket    int64
	threshold int64
	median    float64
	done      bool
}

// spikeMemos bounds what an instance remembers: only keys whose bucket
// reached SpikeFloor are in it, and it starts over when full.
const spikeMemos = 10_000

type spikeCache struct {
	mu sync.Mutex
	m  map[string]spikeMemo
}

func (c *spikeCache) get(keyID string) (spikeMemo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.m[keyID]
	return m, ok
}

// keep stores what a committed flush learnt, the newest bucket winning.
func (c *spikeCache) keep(learnt map[string]spikeMemo) {
	if len(learnt) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m)+len(learnt) > spikeMemos {
		c.m = map[string]spikeMemo{}
	}
	for k, m := range learnt {
		if old, ok := c.m[k]; !ok || m.bucket >= old.bucket {
			c.m[k] = m
		}
	}
}

type keyBucket struct {
	keyID  string
	bucket int64
}

// bucketSums adds counts up per key and SpikeBucket, in key and bucket
// order.
func bucketSums(counts []UsageCount) ([]keyBucket, map[keyBucket]int64) {
	w := SpikeBucket.Milliseconds()
	sums := map[keyBucket]int64{}
	for _, c := range counts {
		if c.KeyID == "" || c.Count <= 0 {
			continue
		}
		ms := toMS(c.Minute)
		sums[keyBucket{c.KeyID, ms - ((ms%w)+w)%w}] += c.Count
	}
	order := make([]keyBucket, 0, len(sums))
	for k := range sums {
		order = append(order, k)
	}
	slices.SortFunc(order, func(a, b keyBucket) int {
		return cmp.Or(strings.Compare(a.keyID, b.keyID), cmp.Compare(a.bucket, b.bucket))
	})
	return order, sums
}

// checkSpikes adds counts to their keys' buckets and, for a bucket that
// reached SpikeFloor, compares it with the key's median (read once a
// bucket an instance) and raises spike.
func (s *Store) checkSpikes(ctx context.Context, tx *Tx, counts []UsageCount) (map[string]spikeMemo, error) {
	order, sums := bucketSums(counts)
	learnt := map[string]spikeMemo{}
	for _, kb := range order {
		var total int64
		if err := tx.QueryRowContext(ctx, `INSERT INTO key_buckets (key_id, bucket, count) VALUES ($1, $2, $3)
			ON CONFLICT (key_id, bucket) DO UPDATE SET count = key_buckets.count + excluded.count
			RETURNING count`, kb.keyID, kb.bucket, sums[kb]).Scan(&total); err != nil {
			return nil, fmt.Errorf("add key bucket: %w", err)
		}
		if total < SpikeFloor {
			continue
		}
		m, ok := learnt[kb.keyID]
		if !ok || m.bucket != kb.bucket {
			m, ok = s.spikes.get(kb.keyID)
		}
		if !ok || m.bucket != kb.bucket {
			var err error
			if m, err = spikeThreshold(ctx, tx, kb); err != nil {
				return nil, err
			}
		}
		if !m.done && total >= m.threshold {
			if err := tx.raiseAnomaly(ctx, spikeAnomaly(kb, total, m.median)); err != nil {
				return nil, err
			}
			m.done = true
		}
		learnt[kb.keyID] = m
	}
	return learnt, nil
}

func spikeAnomaly(kb keyBucket, total int64, median float64) anomaly {
	start := fromMS(kb.bucket)
	return anomaly{keyID: kb.keyID, reason: AnomalySpike, at: start,
		details: map[string]any{"bucket_start": start.UTC().Format(wire.TimeFormat), "bucket_minutes": int(SpikeBucket / time.Minute),
			"count": total, "median": median},
		detail: fmt.Sprintf("%d requests in the 10 minutes from %s, against a median of %g per 10 minutes over the 7 days before",
			total, start.Format("2006-01-02 15:04 UTC"), median)}
}

// spikeThreshold reads the key's buckets of the SpikeWindow before kb and
// returns its median (empty buckets count as zero) and threshold.
func spikeThreshold(ctx context.Context, tx *Tx, kb keyBucket) (spikeMemo, error) {
	rows, err := tx.QueryContext(ctx, `SELECT count FROM key_buckets WHERE key_id = $1 AND bucket >= $2 AND bucket < $3`,
		kb.keyID, kb.bucket-SpikeWindow.Milliseconds(), kb.bucket)
	counts, err := collect("key buckets", rows, err, func(r *sql.Rows) (n int64, err error) {
		err = r.Scan(&n)
		return
	})
	if err != nil {
		return spikeMemo{}, err
	}
	lo, hi := medianPair(counts, int(SpikeWindow/SpikeBucket))
	return spikeMemo{bucket: kb.bucket, median: float64(lo+hi) / 2,
		threshold: max(SpikeFloor, (SpikeFactor*(lo+hi)+1)/2)}, nil
}

// medianPair is the two middle values of n buckets of which counts are the
// non-empty ones (the rest zero); the median is their mean.
func medianPair(counts []int64, n int) (int64, int64) {
	slices.Sort(counts)
	zeros := n - len(counts)
	at := func(i int) int64 {
		if i < zeros {
			return 0
		}
		return counts[i-zeros]
	}
	return at(n/2 - 1), at(n / 2)
}

// ---- after_idle

// idleKey is a key that looked idle before this touch: its last use (nil:
// never) and creation.
type idleKey struct {
	lastUsed *time.Time
	created  time.Time
}

// idleCandidates reads which of ids (sorted) were unused for IdleAfter
// before the newest use of the batch, unrevoked: the keys whose touch may
// be a use after idle (each is checked again, exactly, as it is written).
func idleCandidates(ctx context.Context, tx *Tx, used map[string]time.Time, ids []string) (map[string]idleKey, error) {
	out := map[string]idleKey{}
	for chunk := range slices.Chunk(ids, 500) {
		var newest time.Time
		args := make([]any, 0, len(chunk)+1)
		marks := make([]string, len(chunk))
		for i, id := range chunk {
			if used[id].After(newest) {
				newest = used[id]
			}
			args = append(args, id)
			marks[i] = fmt.Sprintf("$%d", i+2)
		}
		args = append([]any{toMS(newest.Add(-IdleAfter))}, args...)
		rows, err := tx.QueryContext(ctx, `SELECT id, last_used_at, created_at FROM api_keys
			WHERE id IN (`+strings.Join(marks, ", ")+`) AND revoked_at IS NULL
			AND (last_used_at < $1 OR last_used_at IS NULL AND created_at < $1)`, args...)
		_, err = collect("idle keys", rows, err, func(r *sql.Rows) (struct{}, error) {
			var id string
			var last sql.NullInt64
			var created int64
			err := r.Scan(&id, &last, &created)
			out[id] = idleKey{lastUsed: fromNullMS(last), created: fromMS(created)}
			return struct{}{}, err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// touchAfterIdle writes key id's use at `at` when the key was unused for
// IdleAfter before it, and then raises after_idle: the UPDATE's condition
// decides, so that of instances touching the key at once only the first
// finds it idle.
func touchAfterIdle(ctx context.Context, tx *Tx, id string, at time.Time, k idleKey) error {
	cut := toMS(at.Add(-IdleAfter))
	res, err := tx.ExecContext(ctx, `UPDATE api_keys SET last_used_at = $1 WHERE id = $2
		AND (last_used_at < $3 OR last_used_at IS NULL AND created_at < $3)`, toMS(at), id, cut)
	if err != nil {
		return fmt.Errorf("touch key %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return err
	}
	since := k.created
	details := map[string]any{"used_at": at.UTC().Format(wire.TimeFormat), "last_used_at": nil,
		"created_at": k.created.UTC().Format(wire.TimeFormat)}
	what := "never used since it was created"
	if k.lastUsed != nil {
		since = *k.lastUsed
		details["last_used_at"] = k.lastUsed.UTC().Format(wire.TimeFormat)
		what = "last used " + k.lastUsed.Format("2006-01-02")
	}
	days := int(at.Sub(since) / (24 * time.Hour))
	details["idle_days"] = days
	return tx.raiseAnomaly(ctx, anomaly{keyID: id, reason: AnomalyAfterIdle, at: at, details: details,
		detail: fmt.Sprintf("used after %d days unused (%s)", days, what)})
}

// ---- notices

// KeyAnomaly is a key's newest anomaly of one reason: the console's notice
// until it is dismissed.
type KeyAnomaly struct {
	KeyID, Reason, AccountID, EventID string
	Details                           json.RawMessage
	SeenAt                            time.Time
	// KeyName and KeyPrefix name the key (KeyAnomalies).
	KeyName, KeyPrefix string
}

// KeyAnomalies lists the account's undismissed notices, newest first, at
// most limit: of key keyID, or, when it is "", of every unrevoked key.
func (s *Store) KeyAnomalies(ctx context.Context, accountID, keyID string, limit int) ([]KeyAnomaly, error) {
	if !storable(accountID, keyID) {
		return nil, nil
	}
	q := `SELECT a.key_id, a.reason, a.account_id, a.event_id, a.details, a.seen_at, k.name, k.prefix
		FROM key_anomalies a JOIN api_keys k ON k.id = a.key_id
		WHERE a.account_id = $1 AND a.dismissed_at IS NULL AND `
	args := []any{accountID, limit}
	if keyID != "" {
		q += `a.key_id = $3`
		args = append(args, keyID)
	} else {
		q += `k.revoked_at IS NULL`
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY a.seen_at DESC, a.key_id, a.reason LIMIT $2`, args...)
	return collect("list key anomalies", rows, err, func(r *sql.Rows) (KeyAnomaly, error) {
		var a KeyAnomaly
		var details string
		var seen int64
		err := r.Scan(&a.KeyID, &a.Reason, &a.AccountID, &a.EventID, &details, &seen, &a.KeyName, &a.KeyPrefix)
		a.Details, a.SeenAt = json.RawMessage(details), fromMS(seen)
		return a, err
	})
}

// DismissKeyAnomaly dismisses the notice of key keyID and reason raised by
// event eventID (a newer anomaly is not dismissed by a page showing the
// older), writing ev, the audit entry, with it. ErrNotFound when there is
// no such undismissed notice in the account.
func (s *Store) DismissKeyAnomaly(ctx context.Context, accountID, keyID, reason, eventID string, ev domain.AuditEvent) error {
	if !storable(accountID, keyID, reason, eventID) {
		return domain.ErrNotFound
	}
	return s.inTx(ctx, func(tx *Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE key_anomalies SET dismissed_at = $1, dismissed_by = $2
			WHERE key_id = $3 AND reason = $4 AND account_id = $5 AND event_id = $6 AND dismissed_at IS NULL`,
			toMS(ev.CreatedAt), ev.ActorID, keyID, reason, accountID, eventID)
		if err != nil {
			return fmt.Errorf("dismiss key notice: %w", err)
		}
		if err := checkAffected(res); err != nil {
			return err
		}
		return insertKeyEvent(ctx, tx, ev)
	})
}
