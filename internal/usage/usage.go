// Package usage records the /v1 requests that identified a key: one request
// log each and a count per key, minute and class (docs/console.md, Usage and
// request logs). Requests only append to memory; a loop writes what is
// buffered in batches, beside the last_used_at write-behind
// (internal/keys/touch.go), and a graceful stop flushes the rest. The store
// adds each instance's counts to what is stored, so totals are exact across
// instances.
package usage

import (
	"cmp"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentapi/agentapi/internal/clientaddr"
	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// Buffer bounds: while the store is away, a recorder keeps at most this many
// logs and counts, drops the oldest logs and any new count beyond, and
// counts what it dropped (Dropped).
const (
	DefaultMaxLogs   = 50_000
	DefaultMaxCounts = 50_000
)

// Store is what a Recorder writes through (store.Store).
type Store interface {
	WritePackedUsage(ctx context.Context, logs *requestlog.Buffer, counts []store.UsageCount) error
	SweepUsage(ctx context.Context, now time.Time) error
}

type countKey struct {
	accountID, keyID, class string
	minute                  int64 // Unix milliseconds
}

// tally is a key's requests of one class in one minute: their count and
// their latencies' histogram (requestlog.LatencyBin), one increment each,
// under the one hash of their countKey.
type tally struct {
	n   int64
	lat [requestlog.LatencyBins]uint32
}

// Recorder buffers requests and writes them in batches. It is safe for
// concurrent use.
type Recorder struct {
	st        Store
	log       *slog.Logger
	interval  time.Duration
	sweepEach time.Duration
	maxLogs   int
	maxCounts int
	dropped   atomic.Uint64

	mu     sync.Mutex
	logs   *requestlog.Buffer // packed as they are stored: bytes, not structs the GC would scan
	counts map[countKey]*tally
	// agents counts the requests to an AI agent's routes
	// (/v1/ai-agents/{agent_id}…), keyed by the agent's id in keyID.
	agents map[countKey]int64
	// refused counts this minute's logged refusals per key or, for a
	// request that identified none, per client address group (budget).
	refused       map[string]int
	refusedMinute int64
}

// RefusedLogsPerMinute is how many refused requests (401, 403, 429) a key,
// or a client address that identified no key, has logged in a minute; the
// rest are counted, not logged, so that no flood of refusals fills its
// account's logs (the sweep's fair shares do the rest).
const RefusedLogsPerMinute = 60

// Options tune a Recorder; zero fields take the defaults.
type Options struct {
	Interval   time.Duration // between flushes; default 1 s
	SweepEvery time.Duration // between retention sweeps; default 10 min
	MaxLogs    int
	MaxCounts  int
}

// New returns a Recorder writing to st.
func New(st Store, log *slog.Logger, o Options) *Recorder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// A negative field, like a zero one, takes its default.
	return &Recorder{
		st: st, log: log,
		interval:  cmp.Or(max(o.Interval, 0), time.Second),
		sweepEach: cmp.Or(max(o.SweepEvery, 0), 10*time.Minute),
		maxLogs:   cmp.Or(max(o.MaxLogs, 0), DefaultMaxLogs),
		maxCounts: cmp.Or(max(o.MaxCounts, 0), DefaultMaxCounts),
		logs:      new(requestlog.Buffer), counts: map[countKey]*tally{}, agents: map[countKey]int64{}, refused: map[string]int{},
	}
}

// Record notes one request. It never touches the store.
//
// The log is packed as it comes (requestlog.Buffer): held as a struct until
// the next flush, a second of requests at 25,000 a second was 5 MB of
// pointers the garbage collector scanned at every cycle. Profiled under the
// bench's GET /v1/me at 64 connections, the collector's mark workers took
// 2.3 % of serve's CPU with structs buffered, 0.4 % with logs packed, and
// 0.2–0.7 % with recording off; Record, Flush and the write together went
// from 3.0 % to 1.5 %.
//
// Beside the count, the request's latency is counted in its bin and, for a
// request to an AI agent's routes, the agent's count is added to: the
// charts' p50 and p95 and the overview's busiest agents read those, not
// the logs (docs/console.md, Usage and request logs).
func (r *Recorder) Record(l requestlog.Log) {
	k := countKey{accountID: l.AccountID, keyID: l.KeyID, class: requestlog.ClassOf(l.Status),
		minute: l.At.Truncate(time.Minute).UnixMilli()}
	bin, agent := requestlog.LatencyBin(l.Duration), agentOf(&l)
	r.mu.Lock()
	if t := r.tally(k); t != nil {
		t.n++
		t.lat[bin]++
	} else {
		r.dropped.Add(1)
	}
	if agent != "" {
		k.keyID = agent
		r.addAgent(k, 1)
	}
	if r.budget(&l, k.minute) {
		r.logs.Add(&l)
		r.bound()
	}
	r.mu.Unlock()
}

// budget reports whether l may be logged: any request that was not
// refused may; a refused one while its key (or, without one, its client's
// address group: IPv6 per /64) has logged fewer than RefusedLogsPerMinute
// this minute. The tally is memory only, reset each minute and bounded as
// the counts are; r.mu is held.
func (r *Recorder) budget(l *requestlog.Log, minute int64) bool {
	if l.Status != 401 && l.Status != 403 && l.Status != 429 {
		return true
	}
	if minute > r.refusedMinute {
		clear(r.refused)
		r.refusedMinute = minute
	}
	unit := "key " + l.KeyID
	if l.KeyID == "" {
		unit = "addr " + clientaddr.Group(l.Client)
	}
	n, held := r.refused[unit]
	if n >= RefusedLogsPerMinute || !held && len(r.refused) >= r.maxCounts {
		return false
	}
	r.refused[unit] = n + 1
	return true
}

// bound drops the oldest logs, a packed batch at a time, while there are
// more than maxLogs; r.mu is held.
func (r *Recorder) bound() {
	for r.logs.Len() > r.maxLogs {
		r.dropped.Add(uint64(r.logs.DropOldest()))
	}
}

// tally is k's tally, nil when the buffer is full and holds none; r.mu is
// held. k is hashed once: it is three strings, hashed under the lock every
// request (BenchmarkRecord).
func (r *Recorder) tally(k countKey) *tally {
	t := r.counts[k]
	if t == nil && len(r.counts) < r.maxCounts {
		t = new(tally)
		r.counts[k] = t
	}
	return t
}

// addTally adds t to k's tally, or drops it when the buffer is full; r.mu
// is held.
func (r *Recorder) addTally(k countKey, t *tally) {
	dst := r.tally(k)
	if dst == nil {
		r.dropped.Add(uint64(t.n))
		return
	}
	dst.n += t.n
	for i, n := range t.lat {
		dst.lat[i] += n
	}
}

// addAgent adds n to an agent's count (its id in k.keyID), or drops it when
// the buffer is full; r.mu is held.
func (r *Recorder) addAgent(k countKey, n int64) {
	if len(r.agents) >= r.maxCounts {
		if _, ok := r.agents[k]; !ok {
			r.dropped.Add(uint64(n))
			return
		}
	}
	r.agents[k] += n
}

// agentRoute is how the routes of one AI agent ({agent_id}) begin, after
// the method.
const agentRoute = "/v1/ai-agents/{"

// agentOf is the id of the AI agent l was a request to, "" when it was none
// or its agent was not found (a 404: ids made up do not count).
func agentOf(l *requestlog.Log) string {
	_, route, _ := strings.Cut(l.Route, " ")
	if !strings.HasPrefix(route, agentRoute) || l.Status == 404 {
		return ""
	}
	id, _, _ := strings.Cut(strings.TrimPrefix(l.Path, "/v1/ai-agents/"), "/")
	if id == "" || len(id) > maxAgentID {
		return ""
	}
	return id
}

// maxAgentID bounds an agent id the recorder counts (ids are 30 bytes).
const maxAgentID = 64

// Dropped is how many logs and counted requests were dropped because the
// buffer was full (the store away for long).
func (r *Recorder) Dropped() uint64 { return r.dropped.Load() }

// Run flushes every interval and sweeps every SweepEvery until ctx ends; it
// does not flush on exit (the caller calls Flush after the server drained).
func (r *Recorder) Run(ctx context.Context) {
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	sweep := time.NewTicker(r.sweepEach)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := r.Flush(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("usage flush", "err", err)
			}
		case <-sweep.C:
			if err := r.st.SweepUsage(ctx, time.Now()); err != nil && ctx.Err() == nil {
				r.log.Warn("usage sweep", "err", err)
			}
		}
	}
}

// Flush writes what is buffered. On failure the batch goes back to the
// buffer (bounded as ever), so nothing is lost while the store is briefly
// away; the store writes a batch in one transaction, so a retry never
// counts twice.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	logs, counts, agents := r.logs, r.counts, r.agents
	if logs.Len() == 0 && len(counts) == 0 && len(agents) == 0 {
		r.mu.Unlock()
		return nil
	}
	// The next second likely holds as many counts: room for them at once,
	// not grown under the lock.
	r.logs, r.counts, r.agents = new(requestlog.Buffer), make(map[countKey]*tally, len(counts)), make(map[countKey]int64, len(agents))
	r.mu.Unlock()
	batch := make([]store.UsageCount, 0, len(counts)+len(agents))
	for k, t := range counts {
		batch = append(batch, store.UsageCount{AccountID: k.accountID, KeyID: k.keyID, Class: k.class,
			Minute: time.UnixMilli(k.minute).UTC(), Count: t.n, Latency: t.lat[:]})
	}
	for k, n := range agents {
		batch = append(batch, store.UsageCount{AccountID: k.accountID, AgentID: k.keyID, Class: k.class,
			Minute: time.UnixMilli(k.minute).UTC(), Count: n})
	}
	err := r.st.WritePackedUsage(ctx, logs, batch)
	if err != nil {
		// The batch goes back before what came in meanwhile.
		r.mu.Lock()
		for k, t := range counts {
			r.addTally(k, t)
		}
		for k, n := range agents {
			r.addAgent(k, n)
		}
		r.logs.Prepend(logs)
		r.bound()
		r.mu.Unlock()
	}
	return err
}
