package ratelimit

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/testenv"
)

func redisClient(t testing.TB) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// newRedis is NewRedis, closed when the test ends.
func newRedis(t *testing.T, c redis.UniversalClient, fallback *Memory, log *slog.Logger) *Redis {
	l := NewRedis(c, fallback, log)
	t.Cleanup(l.Close)
	return l
}

func uniqueKey() string { return "test-" + rand.Text() }

func TestRedisExactAcrossInstances(t *testing.T) {
	a := newRedis(t, redisClient(t), NewMemory(nil), nil)
	b := newRedis(t, redisClient(t), NewMemory(nil), nil)
	key := uniqueKey()
	const n = 25
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range 80 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := a
			if i%2 == 1 {
				l = b
			}
			r, err := l.Allow(context.Background(), key, n)
			if err != nil {
				t.Error(err)
				return
			}
			if r.Allowed {
				ok.Add(1)
			} else {
				refused.Add(1)
				if r.RetryAfter < time.Second || r.Remaining != 0 {
					t.Errorf("refusal %+v", r)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != n || refused.Load() != 80-n {
		t.Fatalf("admitted %d, refused %d; want exactly %d", ok.Load(), refused.Load(), n)
	}
	if a.Fallbacks()+b.Fallbacks() != 0 {
		t.Fatal("fell back with Redis up")
	}
}

func TestRedisResultFigures(t *testing.T) {
	c := redisClient(t)
	l := newRedis(t, c, NewMemory(nil), nil)
	key := uniqueKey()
	first, err := l.Allow(context.Background(), key, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Allowed || first.Remaining != 2 || first.Limit != 3 {
		t.Fatalf("first %+v", first)
	}
	if d := time.Until(first.Reset); d < 58*time.Second || d > 62*time.Second {
		t.Fatalf("reset in %v", d)
	}
	for range 2 {
		_, _ = l.Allow(context.Background(), key, 3)
	}
	for range 3 { // refused requests are not counted
		r, _ := l.Allow(context.Background(), key, 3)
		if r.Allowed || r.RetryAfter < 58*time.Second || r.RetryAfter > 61*time.Second {
			t.Fatalf("refusal %+v", r)
		}
	}
	tag := "{agentapi:rl:" + key + "}"
	if n, _ := c.LLen(context.Background(), tag+":log").Result(); n > 2 {
		t.Fatalf("runs list holds %d entries for 3 admissions (the newest run is in meta)", n)
	}
	if v, _ := c.Get(context.Background(), tag+":win").Result(); !strings.HasPrefix(v, "3:") {
		t.Fatalf("meta %q, want a total of 3", v)
	}
	keys := []string{tag + ":win"}
	if n, _ := c.LLen(context.Background(), tag+":log").Result(); n > 0 {
		keys = append(keys, tag+":log")
	}
	for _, k := range keys {
		if ttl, _ := c.PTTL(context.Background(), k).Result(); ttl <= 0 || ttl > 61*time.Second {
			t.Fatalf("%s ttl %v: idle keys must expire", k, ttl)
		}
	}
	// A huge ceiling does not grow Redis memory with the ceiling.
	big := uniqueKey()
	for range 200 {
		_, _ = l.Allow(context.Background(), big, 100_000_000)
	}
	if n, _ := c.LLen(context.Background(), "{agentapi:rl:"+big+"}:log").Result(); n > 200 {
		t.Fatalf("log %d entries", n)
	}
}

func TestRedisFallbackAndRecovery(t *testing.T) {
	real := redisClient(t)
	proxy := testenv.NewProxy(t, real.Options().Addr)
	opts := *real.Options()
	opts.Addr = proxy.Addr()
	opts.MaxRetries = 0
	opts.DialTimeout = 200 * time.Millisecond
	c := redis.NewClient(&opts)
	defer c.Close()
	var rt roundTrips
	c.AddHook(&rt)
	l := newRedis(t, c, NewMemory(nil), nil)
	l.pause = 100 * time.Millisecond
	key := uniqueKey()
	if r, err := l.Allow(context.Background(), key, 5); err != nil || !r.Allowed {
		t.Fatalf("with Redis: %+v %v", r, err)
	}
	proxy.Cut()
	start := time.Now()
	admitted := 0
	for range 8 {
		r, err := l.Allow(context.Background(), key, 5)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			admitted++
		}
	}
	if admitted != 5 || l.Fallbacks() < 8 {
		t.Fatalf("fallback admitted %d (want the full ceiling, 5, never unlimited); fallbacks %d", admitted, l.Fallbacks())
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("fallback took %v", time.Since(start))
	}
	// While Redis is away no request tries it (and waits on it): only the
	// probe does, with a decision of its own every pause.
	scripts := rt.scripts.Load()
	for range 10 {
		time.Sleep(50 * time.Millisecond)
		if _, err := l.Allow(context.Background(), key, 5); err != nil {
			t.Fatal(err)
		}
	}
	if got := rt.scripts.Load(); got != scripts {
		t.Fatalf("%d script calls while Redis was down, want none: requests waited on it", got-scripts)
	}
	if rt.probes.Load() == 0 {
		t.Fatal("no probe while Redis was down")
	}
	// Redis returns: the limiter goes back to it by itself.
	proxy.Restore()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		before := l.Fallbacks()
		if _, err := l.Allow(context.Background(), uniqueKey(), 5); err != nil {
			t.Fatal(err)
		}
		if l.Fallbacks() == before {
			return // decided in Redis again
		}
	}
	t.Fatal("did not return to Redis")
}

func TestRedisUnreachableFromTheStart(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: 0, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	l := newRedis(t, c, NewMemory(nil), nil)
	for i := range 3 {
		r, err := l.Allow(context.Background(), "k", 2)
		if err != nil || r.Allowed != (i < 2) {
			t.Fatalf("request %d: %+v %v", i, r, err)
		}
	}
	if l.Fallbacks() != 3 {
		t.Fatalf("fallbacks %d", l.Fallbacks())
	}
}

// roundTrips counts the commands and pipelines (round trips) a client
// sends, and among the commands the script calls for requests and those
// of the limiter's probe.
type roundTrips struct{ n, scripts, probes atomic.Int64 }

func (*roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (p *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		p.n.Add(1)
		switch cmd.Name() {
		case "evalsha", "eval":
			if strings.Contains(fmt.Sprint(cmd.Args()...), probeKey) {
				p.probes.Add(1)
			} else {
				p.scripts.Add(1)
			}
		}
		return next(ctx, cmd)
	}
}
func (p *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		p.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestRedisBatchesConcurrentCalls: concurrent decisions share round trips,
// and stay exact.
func TestRedisBatchesConcurrentCalls(t *testing.T) {
	c := redisClient(t)
	var rt roundTrips
	c.AddHook(&rt)
	l := newRedis(t, c, NewMemory(nil), nil)
	key := uniqueKey()
	const callers, each, ceiling = 32, 20, 500
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				r, err := l.Allow(context.Background(), key, ceiling)
				if err != nil {
					t.Error(err)
					return
				}
				if r.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != ceiling || l.Fallbacks() != 0 {
		t.Fatalf("admitted %d of %d with ceiling %d (fallbacks %d)", admitted.Load(), callers*each, ceiling, l.Fallbacks())
	}
	if n := rt.n.Load(); n >= callers*each*3/4 {
		t.Fatalf("%d round trips for %d concurrent decisions: not batched", n, callers*each)
	}
	t.Logf("%d decisions in %d round trips", callers*each, rt.n.Load())
}

// TestRedisReloadsAFlushedScript: after Redis forgets the script (restart,
// SCRIPT FLUSH), decisions are still made in Redis.
func TestRedisReloadsAFlushedScript(t *testing.T) {
	c := redisClient(t)
	l := newRedis(t, c, NewMemory(nil), nil)
	key := uniqueKey()
	for i := range 3 {
		if err := c.ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		r, err := l.Allow(context.Background(), key, 2)
		if err != nil || r.Allowed != (i < 2) {
			t.Fatalf("request %d after SCRIPT FLUSH: %+v %v", i, r, err)
		}
	}
	if l.Fallbacks() != 0 {
		t.Fatalf("%d decisions fell back after SCRIPT FLUSH", l.Fallbacks())
	}
}

// TestRedisAfterClose: a closed limiter decides in the fallback at once.
func TestRedisAfterClose(t *testing.T) {
	l := NewRedis(redisClient(t), NewMemory(nil), nil)
	l.Close()
	l.Close() // twice is fine
	done := make(chan struct{})
	go func() {
		defer close(done)
		r, err := l.Allow(context.Background(), uniqueKey(), 1)
		if err != nil || !r.Allowed || l.Fallbacks() != 1 {
			t.Errorf("after Close: %+v %v, fallbacks %d", r, err, l.Fallbacks())
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Allow after Close blocked")
	}
}

func sameResult(a, b Result) bool {
	return a.Allowed == b.Allowed && a.Limit == b.Limit && a.Remaining == b.Remaining &&
		a.Reset.Equal(b.Reset) && a.RetryAfter == b.RetryAfter
}

// TestRedisMatchesMemory: the script and the in-process window decide
// alike and report the same figures, call for call, over random traffic on
// a simulated clock (the script reads the test's clock, not Redis's):
// bursts in one millisecond, steps of a few milliseconds and seconds, idle
// gaps across the whole window, ceilings that change. The calls go to
// Redis in batches of one to eight, as concurrent calls do, so one script
// call decides several, often of the same key.
func TestRedisMatchesMemory(t *testing.T) {
	ctx := context.Background()
	var nowMS atomic.Int64
	nowMS.Store(1_800_000_000_000)
	c := redisClient(t)
	l := newRedis(t, c, NewMemory(nil), nil)
	l.testNowMS = nowMS.Load
	m := NewMemory(func() time.Time { return time.UnixMilli(nowMS.Load()) })
	defer m.Close()
	rng := mrand.New(mrand.NewPCG(1, 2))
	keys := []string{uniqueKey(), uniqueKey(), uniqueKey()}
	limits := map[string]int{keys[0]: 1, keys[1]: 7, keys[2]: 60}
	rg := &redisMatchesRig{t: t, ctx: ctx, c: c, l: l, m: m, nowMS: &nowMS, keys: keys}
	size := 1
	for range 6000 {
		rg.advance(rng)
		k := keys[rng.IntN(len(keys))]
		if rng.IntN(500) == 0 { // a support change of the ceiling
			limits[k] = 1 + rng.IntN(80)
		}
		runs, meta := (&Redis{}).windowKeys(k, "")
		rg.batch = append(rg.batch, redisMatchesDecision{k, limits[k], &allowCall{keys: []string{runs, meta}, limit: limits[k], nowMS: nowMS.Load()}})
		if len(rg.batch) >= size {
			rg.flush()
			size = 1 + rng.IntN(8)
		}
	}
	if len(rg.batch) > 0 {
		rg.flush()
	}
	if rg.batches > 3000 {
		t.Fatalf("%d batches for 6000 calls: the test did not exercise batches", rg.batches)
	}
	if l.Fallbacks() != 0 || rg.allowed < 1000 {
		t.Fatalf("fallbacks %d, %d admitted: the test did not exercise the script", l.Fallbacks(), rg.allowed)
	}

	// Idle expiry: the meta string expired (the list may outlive it) or
	// the list expired first; either way the next decision is the one the
	// in-process window makes after the same idle minute.
	for _, expire := range []string{":win", ":log"} {
		rg.idleExpiry(expire)
	}
}

// redisMatchesDecision is one call of TestRedisMatchesMemory waiting in a
// batch.
type redisMatchesDecision struct {
	key   string
	limit int
	call  *allowCall
}

// redisMatchesRig holds TestRedisMatchesMemory's limiter in Redis, its
// in-process reference m, the simulated clock, the batch being built and
// the tallies.
type redisMatchesRig struct {
	t          *testing.T
	ctx        context.Context
	c          *redis.Client
	l          *Redis
	m          *Memory
	nowMS      *atomic.Int64
	keys       []string
	allowed    int
	batches    int
	admittedAt []int64
	batch      []redisMatchesDecision
}

// advance moves the clock as the traffic does: an admission's departure
// from the window (give or take a millisecond), the same millisecond, a
// few milliseconds, a few seconds, or a whole idle window.
func (rg *redisMatchesRig) advance(rng *mrand.Rand) {
	switch x := rng.IntN(100); {
	case x < 8 && len(rg.admittedAt) > 0:
		// Exactly at, or a millisecond either side of, the moment an
		// earlier admission leaves the window.
		at := rg.admittedAt[rng.IntN(len(rg.admittedAt))] + windowMS + int64(rng.IntN(3)-1)
		rg.nowMS.Store(max(at, rg.nowMS.Load()))
	case x < 40: // the same millisecond
	case x < 85:
		rg.nowMS.Add(int64(rng.IntN(40)))
	case x < 98:
		rg.nowMS.Add(int64(rng.IntN(15_000)))
	default:
		rg.nowMS.Add(int64(55_000 + rng.IntN(10_000)))
	}
}

// flush sends the batch to Redis in one script call, checks each decision
// against the in-process window's, and empties the batch.
func (rg *redisMatchesRig) flush() {
	rg.t.Helper()
	calls := make([]*allowCall, len(rg.batch))
	for i, d := range rg.batch {
		calls[i] = d.call
	}
	rg.l.decide(calls, nil, nil)
	rg.batches++
	for i, d := range rg.batch {
		rg.check(i, d)
	}
	rg.batch = rg.batch[:0]
}

// check compares call i of the batch, decided in Redis, with the
// in-process window's decision at the call's moment, and keeps the last
// 50 admission times.
func (rg *redisMatchesRig) check(i int, d redisMatchesDecision) {
	rg.t.Helper()
	if d.call.err != nil {
		rg.t.Fatal(d.call.err)
	}
	got := scriptResult(d.call.vals, d.limit)
	rg.nowMS.Store(d.call.nowMS) // the in-process window decides at the call's moment
	want, _ := rg.m.Allow(rg.ctx, d.key, d.limit)
	if !sameResult(got, want) {
		rg.t.Fatalf("batch %d, call %d of %d (key %d, ceiling %d): Redis %+v, in process %+v",
			rg.batches, i, len(rg.batch), slices.Index(rg.keys, d.key), d.limit, got, want)
	}
	if got.Allowed {
		rg.allowed++
		rg.admittedAt = append(rg.admittedAt, d.call.nowMS)
		if len(rg.admittedAt) > 50 {
			rg.admittedAt = rg.admittedAt[1:]
		}
	}
}

// idleExpiry: a fresh key, its window's expire part (":win" or ":log")
// deleted after an idle minute, decides in Redis as in process, before and
// after.
func (rg *redisMatchesRig) idleExpiry(expire string) {
	rg.t.Helper()
	k := uniqueKey()
	for i := range 5 {
		rg.nowMS.Add(int64(i + 1))
		r, _ := rg.l.Allow(rg.ctx, k, 3)
		w, _ := rg.m.Allow(rg.ctx, k, 3)
		if !sameResult(r, w) {
			rg.t.Fatalf("before expiring %s: %+v vs %+v", expire, r, w)
		}
	}
	rg.nowMS.Add(61_000)
	if err := rg.c.Del(rg.ctx, "{agentapi:rl:"+k+"}"+expire).Err(); err != nil {
		rg.t.Fatal(err)
	}
	for range 4 {
		r, _ := rg.l.Allow(rg.ctx, k, 3)
		w, _ := rg.m.Allow(rg.ctx, k, 3)
		if !sameResult(r, w) {
			rg.t.Fatalf("after %s expired: %+v vs %+v", expire, r, w)
		}
	}
}

// TestRedisBadWindowFailsOnlyItsCall: when one key's window in Redis holds
// something else, that decision alone fails (and falls back in process);
// the others in its batch are decided in Redis, and the limiter stays up.
func TestRedisBadWindowFailsOnlyItsCall(t *testing.T) {
	ctx := context.Background()
	c := redisClient(t)
	l := newRedis(t, c, NewMemory(nil), nil)
	good1, bad, good2 := uniqueKey(), uniqueKey(), uniqueKey()
	badRuns, badMeta := (&Redis{}).windowKeys(bad, "")
	// A win string saying one chunk of old runs is in the log, and a
	// string where the log should be: the script's LPOP fails with
	// WRONGTYPE.
	if err := c.Set(ctx, badMeta, "1:-1:0:1:0||", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, badRuns, "not a list", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	var calls []*allowCall
	for _, k := range []string{good1, bad, good2} {
		runs, meta := (&Redis{}).windowKeys(k, "")
		calls = append(calls, &allowCall{keys: []string{runs, meta}, limit: 5})
	}
	l.decide(calls, nil, nil)
	for i, call := range calls {
		if (call.err != nil) != (i == 1) {
			t.Fatalf("call %d: err %v", i, call.err)
		}
	}
	if !errors.Is(calls[1].err, errWindow) {
		t.Fatalf("bad window: %v", calls[1].err)
	}
	for _, i := range []int{0, 2} {
		if r := scriptResult(calls[i].vals, 5); !r.Allowed || r.Remaining != 4 {
			t.Fatalf("call %d: %+v", i, r)
		}
	}
	// Through Allow: the bad key is decided in process, the next key in
	// Redis as before (the limiter did not mark Redis down).
	if r, err := l.Allow(ctx, bad, 5); err != nil || !r.Allowed || l.Fallbacks() != 1 {
		t.Fatalf("bad key through Allow: %+v %v, fallbacks %d", r, err, l.Fallbacks())
	}
	if r, err := l.Allow(ctx, good1, 5); err != nil || r.Remaining != 3 || l.Fallbacks() != 1 {
		t.Fatalf("good key after a bad one: %+v %v, fallbacks %d", r, err, l.Fallbacks())
	}
}

// readOnlyRedis is a server that speaks just enough RESP to be a read-only
// replica: PING and connection set-up succeed, every other command is
// refused with READONLY. It returns its address.
func readOnlyRedis(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go readOnlyRedisServe(conn)
		}
	}()
	return ln.Addr().String()
}

// readOnlyRedisServe answers conn's commands until it closes or sends
// something that is not RESP.
func readOnlyRedisServe(conn net.Conn) {
	defer conn.Close()
	rd := bufio.NewReader(conn)
	for {
		name, err := readOnlyRedisCommand(rd)
		if err != nil {
			return
		}
		if _, err := io.WriteString(conn, readOnlyRedisReply(name)); err != nil {
			return
		}
	}
}

// readOnlyRedisCommand reads one RESP array of bulk strings and returns
// its first element, the command's name, in upper case.
func readOnlyRedisCommand(rd *bufio.Reader) (string, error) {
	var n int
	if _, err := fmt.Fscanf(rd, "*%d\r\n", &n); err != nil {
		return "", err
	}
	var name string
	for i := range n {
		var size int
		if _, err := fmt.Fscanf(rd, "$%d\r\n", &size); err != nil {
			return "", err
		}
		arg := make([]byte, size+2)
		if _, err := io.ReadFull(rd, arg); err != nil {
			return "", err
		}
		if i == 0 {
			name = strings.ToUpper(string(arg[:size]))
		}
	}
	return name, nil
}

// readOnlyRedisReply is a read-only replica's answer to the command name.
func readOnlyRedisReply(name string) string {
	reply := "-READONLY You can't write against a read only replica.\r\n"
	switch name {
	case "PING":
		reply = "+PONG\r\n"
	case "HELLO":
		reply = "-ERR unknown command 'HELLO'\r\n"
	case "CLIENT", "SELECT":
		reply = "+OK\r\n"
	}
	return reply
}

// TestReadOnlyRedisStaysDown: a Redis that answers PING but refuses the
// script is not "back": the limiter warns once and stays on its fallback,
// rather than flapping between the two every pause.
func TestReadOnlyRedisStaysDown(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: readOnlyRedis(t), Protocol: 2, MaxRetries: 0})
	defer c.Close()
	var logs syncLog
	l := newRedis(t, c, NewMemory(nil), slog.New(slog.NewTextHandler(&logs, nil)))
	l.pause = 50 * time.Millisecond
	for range 20 {
		if _, err := l.Allow(context.Background(), uniqueKey(), 5); err != nil {
			t.Fatal(err)
		}
		time.Sleep(25 * time.Millisecond) // ten probes in all
	}
	out := logs.String()
	if n := strings.Count(out, "redis unavailable"); n != 1 || strings.Contains(out, "redis is back") {
		t.Fatalf("%d warnings, back %v; want one warning and no return:\n%s", n, strings.Contains(out, "redis is back"), out)
	}
}

// syncLog is a log destination safe for the limiter's goroutines.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncLog) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncLog) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
