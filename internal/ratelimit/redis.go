package ratelimit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// allowScript decides a batch of requests one after another, as if they
// had come one by one, in one atomic call (no other instance's decision
// falls between them), inside Redis and on Redis's own clock so instances
// with skewed clocks agree. One call carries a whole batch: Redis's cost per
// call (reading the command, the script's setup, writing its reply) is paid
// once per round trip, not once per request.
//
// Each decision's window is the same run-length log as Memory's (runs of
// admissions in one millisecond, oldest first), kept so that the common
// request costs two Redis calls, GET and SET of one small string (SET
// only when something changed): the newest run, the figures and up to two
// sections of runs live in that string; the list holds the runs between
// them in chunks of chunkRuns, and is touched once per chunkRuns runs at
// most (a section fills and goes to the list, or the oldest section has
// left the window and the next comes from the list).
//
// For the i-th decision (from 1): KEYS[4i-3] log: list of chunks, each
// chunkRuns runs "ms/count," oldest first. KEYS[4i-2] win:
// "total:tail:tailCount:chunks:tailRuns|head|tailSec", where tail is the
// newest run's millisecond (-1 when none), chunks the length of the log,
// head the oldest runs (a chunk taken from the log, or what tailSec was
// when the log was empty), tailSec the runs after the log's, tailRuns of
// them, and the newest run is not in either section. KEYS[4i-1] the
// decision's guard (Guard.Key) and KEYS[4i] the key it reads along
// (Guard.Read), each used only when its bit of ARGV[4i+1] is set (1: the
// guard, 2: the read). ARGV[1] window ms; ARGV[4i-2] limit; ARGV[4i-1] now
// in ms, 0 for Redis's clock (tests set it); ARGV[4i] the value the guard
// must hold (Guard.Want). A guard is read once per call, however many
// decisions name it.
// Returns six integers per decision, in order: allowed, total, oldest ms or
// -1, free-at ms, now ms, and the read key's value (-1 when absent, not
// asked for, or the decision not made); allowed is -1 when that decision
// failed (its keys hold something else), which fails that call alone. When
// the guard holds something else than ARGV[4i] (absent reads as -1),
// nothing is recorded: allowed is -2 and total is what the guard holds.
//
// Both keys expire when idle; a log that outlived its win string is stale
// and is dropped, and one that expired first held only runs that had left
// the window (its expiry is renewed whenever a chunk is added to it).
var allowScript = redis.NewScript(`
local window = tonumber(ARGV[1])
local chunkRuns = 16
local winForm = '^(%d+):(%-?%d+):(%d+):(%d+):(%d+)|([^|]*)|([^|]*)$'
local clock
local guards = {}
local function guard(key)
  local v = guards[key]
  if v == nil then
    v = tonumber(redis.call('GET', key) or '-1') or -1
    guards[key] = v
  end
  return v
end
local function sum(sec)
  local n = 0
  for c in string.gmatch(sec, '/(%d+),') do n = n + tonumber(c) end
  return n
end
-- scan adds sec's runs, oldest first, to freed until it reaches need;
-- it returns freed and the run's millisecond that reached it, if one did.
local function scan(sec, freed, need)
  for ms, c in string.gmatch(sec, '(%d+)/(%d+),') do
    freed = freed + tonumber(c)
    if freed >= need then return freed, tonumber(ms) end
  end
  return freed, nil
end
local function freeAt(logKey, total, limit, head, chunks, tsec, tail)
  local need = total - limit + 1
  local freed, ms = scan(head, 0, need)
  local j = 0
  while not ms and j < chunks do
    local batch = redis.call('LRANGE', logKey, j, j + 99)
    if #batch == 0 then break end
    for _, sec in ipairs(batch) do
      freed, ms = scan(sec, freed, need)
      if ms then break end
    end
    j = j + 100
  end
  if not ms then freed, ms = scan(tsec, freed, need) end
  return (ms or tail) + window
end
-- windows holds each window the call has read, by its win key: a batch
-- with many decisions for one key reads it once and writes it once (flush).
local windows = {}
local function load(logKey, winKey)
  local w = windows[winKey]
  if w then
    if w.bad then error('window unusable') end
    return w
  end
  w = {log = logKey, total = 0, tail = -1, tc = 0, chunks = 0, ntail = 0, head = '', tsec = '', dirty = false}
  -- GET answers false for an absent key: no match, as for a stale form.
  local a, b, c, d, e, h, t = string.match(redis.call('GET', winKey) or '', winForm)
  if a then
    w.total, w.tail, w.tc, w.chunks, w.ntail, w.head, w.tsec = tonumber(a), tonumber(b), tonumber(c), tonumber(d), tonumber(e), h, t
  else
    redis.call('DEL', logKey)
    w.dirty = true
  end
  windows[winKey] = w
  return w
end
-- oldestRun brings the oldest run to the front of w.head (from the log, or
-- tailSec when the log is empty) and returns its millisecond and count,
-- and whether it is the newest run; nil when w counts nothing after all.
local function oldestRun(w)
  if w.head == '' then
    if w.chunks > 0 then
      w.head, w.chunks, w.dirty = redis.call('LPOP', w.log), w.chunks - 1, true
      if not w.head then
        -- The log expired: every run in it had left the window.
        w.head, w.chunks, w.tsec, w.ntail = w.tsec, 0, '', 0
        w.total = sum(w.head) + w.tc
      end
    elseif w.tsec ~= '' then
      w.head, w.tsec, w.ntail, w.dirty = w.tsec, '', 0, true
    end
  end
  if w.head ~= '' then
    local ms, n = string.match(w.head, '^(%d+)/(%d+),')
    return tonumber(ms), tonumber(n), false
  end
  if w.tc > 0 then return w.tail, w.tc, true end
  return nil
end
-- expire drops the runs that left the window; it returns the oldest
-- counted millisecond, -1 when none.
local function expire(w, edge)
  while w.total > 0 do
    local ms, n, newest = oldestRun(w)
    if not ms then break end
    if ms > edge then return ms end
    w.total, w.dirty = w.total - n, true
    if newest then
      w.tail, w.tc = -1, 0
    else
      w.head = string.sub(w.head, string.find(w.head, ',', 1, true) + 1)
    end
  end
  if w.chunks > 0 then redis.call('DEL', w.log) end
  w.total, w.tail, w.tc, w.chunks, w.ntail, w.head, w.tsec = 0, -1, 0, 0, 0, '', ''
  return -1
end
local function admit(w, now)
  w.total, w.dirty = w.total + 1, true
  if w.tc > 0 and w.tail >= now then
    w.tc = w.tc + 1
    return
  end
  if w.tc > 0 then
    w.tsec, w.ntail = w.tsec .. w.tail .. '/' .. w.tc .. ',', w.ntail + 1
    if w.ntail >= chunkRuns then
      redis.call('RPUSH', w.log, w.tsec)
      redis.call('PEXPIRE', w.log, window + 1000)
      w.chunks, w.tsec, w.ntail = w.chunks + 1, '', 0
    end
  end
  w.tail, w.tc = now, 1
end
local function decide(logKey, winKey, limit, now)
  if now == 0 then
    if not clock then
      local t = redis.call('TIME')
      clock = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    now = clock
  end
  local w = load(logKey, winKey)
  local oldest = expire(w, now - window)
  if w.total < limit then
    admit(w, now)
    if oldest < 0 then oldest = w.tail end
    return 1, w.total, oldest, now, now
  end
  return 0, w.total, oldest, freeAt(w.log, w.total, limit, w.head, w.chunks, w.tsec, w.tail), now
end
local function flush()
  for winKey, w in pairs(windows) do
    if w.dirty and not w.bad then
      redis.call('SET', winKey, w.total .. ':' .. w.tail .. ':' .. w.tc .. ':' .. w.chunks .. ':' .. w.ntail .. '|' .. w.head .. '|' .. w.tsec, 'PX', window + 1000)
    end
  end
end
local out = {}
for i = 1, #KEYS / 4 do
  local flags = tonumber(ARGV[4 * i + 1])
  local ok, allowed, total, oldest, free, now
  local read = -1
  local want = tonumber(ARGV[4 * i])
  if flags % 2 == 1 and guard(KEYS[4 * i - 1]) ~= want then
    ok, allowed, total, oldest, free, now = true, -2, guard(KEYS[4 * i - 1]), 0, 0, 0
  else
    ok, allowed, total, oldest, free, now = pcall(decide, KEYS[4 * i - 3], KEYS[4 * i - 2], tonumber(ARGV[4 * i - 2]), tonumber(ARGV[4 * i - 1]))
    if not ok then
      local w = windows[KEYS[4 * i - 2]]
      if w then w.bad = true else windows[KEYS[4 * i - 2]] = {bad = true} end
    end
    if ok and flags >= 2 then
      read = tonumber(redis.call('GET', KEYS[4 * i]) or '-1') or -1
    end
  end
  if not ok then
    -- This key's window could not be read or written (a key of another
    -- type in its place): the others are still decided.
    redis.log(redis.LOG_WARNING, 'agentapi rate limit: ' .. tostring(allowed))
    allowed, total, oldest, free, now = -1, 0, 0, 0, 0
  end
  local n = #out
  out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5], out[n + 6] = allowed, total, oldest, free, now, read
end
flush()
return out
`)

// mergeScript adds admissions an instance made in process, while Redis was
// away, to the keys' windows, keeping each window's form (allowScript):
// the runs, old and added, are merged oldest first (one run per
// millisecond), those that left the window are dropped, and both keys are
// written again. Times travel as ages, placed on Redis's clock, so an
// instance's skewed clock does not move them.
//
// KEYS as allowScript's, two per key. ARGV[1] window ms; ARGV[2] now in
// ms, 0 for Redis's clock (tests set it); ARGV[i+2] the i-th key's added
// runs, oldest first, as "age:count" joined by commas (age in ms, ≥ 0).
// Returns per key the admissions its window then counts, or -1 when its
// keys hold something else (Redis logs why).
var mergeScript = redis.NewScript(`
local window = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local chunkRuns = 16
local winForm = '^(%d+):(%-?%d+):(%d+):(%d+):(%d+)|([^|]*)|([^|]*)$'
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local edge = now - window
local function read(logKey, winKey)
  local old = {}
  local function add(sec)
    for ms, c in string.gmatch(sec, '(%d+)/(%d+),') do old[#old + 1] = {tonumber(ms), tonumber(c)} end
  end
  local _, tail, tc, chunks, _, head, tsec = string.match(redis.call('GET', winKey) or '', winForm)
  if tail then
    add(head)
    if tonumber(chunks) > 0 then
      for _, sec in ipairs(redis.call('LRANGE', logKey, 0, -1)) do add(sec) end
    end
    add(tsec)
    if tonumber(tc) > 0 then old[#old + 1] = {tonumber(tail), tonumber(tc)} end
  end
  return old
end
local function write(logKey, winKey, out)
  redis.call('DEL', logKey)
  if #out == 0 then
    redis.call('DEL', winKey)
    return 0
  end
  local total, chunks, sec, ntail = 0, 0, '', 0
  local batch = {}
  for k, e in ipairs(out) do
    total = total + e[2]
    if k < #out then
      sec, ntail = sec .. e[1] .. '/' .. e[2] .. ',', ntail + 1
      if ntail == chunkRuns then
        batch[#batch + 1], chunks, sec, ntail = sec, chunks + 1, '', 0
        if #batch == 1000 then
          redis.call('RPUSH', logKey, unpack(batch))
          batch = {}
        end
      end
    end
  end
  if #batch > 0 then redis.call('RPUSH', logKey, unpack(batch)) end
  if chunks > 0 then redis.call('PEXPIRE', logKey, window + 1000) end
  local last = out[#out]
  redis.call('SET', winKey, total .. ':' .. last[1] .. ':' .. last[2] .. ':' .. chunks .. ':' .. ntail .. '||' .. sec, 'PX', window + 1000)
  return total
end
local function merge(logKey, winKey, added)
  local old = read(logKey, winKey)
  local new = {}
  for age, c in string.gmatch(added, '(%d+):(%d+)') do
    new[#new + 1] = {now - tonumber(age), tonumber(c)}
  end
  local out = {}
  local function put(e)
    if e[1] <= edge then return end
    local last = out[#out]
    if last and last[1] >= e[1] then
      last[2] = last[2] + e[2]
    else
      out[#out + 1] = {e[1], e[2]}
    end
  end
  local i, j = 1, 1
  while i <= #old or j <= #new do
    if j > #new or (i <= #old and old[i][1] <= new[j][1]) then
      put(old[i])
      i = i + 1
    else
      put(new[j])
      j = j + 1
    end
  end
  return write(logKey, winKey, out)
end
local res = {}
for i = 1, #KEYS / 2 do
  local ok, total = pcall(merge, KEYS[2 * i - 1], KEYS[2 * i], ARGV[i + 2])
  if not ok then
    redis.log(redis.LOG_WARNING, 'agentapi rate limit: ' .. tostring(total))
    total = -1
  end
  res[i] = total
end
return res
`)

// Redis is the limiter shared by every instance. When Redis fails it
// decides with an in-process fallback at the full ceiling: degraded (each
// instance admits up to N on its own), never unlimited; it logs the change
// once, and a probe tries a decision in Redis every pause (a second) until
// one succeeds: requests do not wait on a dead Redis, only the ones that
// found it dead. Before decisions go back to Redis, the admissions made in
// process are added to the shared windows (syncFallback): a Redis that
// restarted empty then still counts them, so over a window a key is
// admitted at most its ceiling plus one ceiling per instance.
//
// Decisions are batched (allowScript): concurrent Allow calls go to Redis
// together, one script call per round trip, by batchWorkers workers (work).
// A call alone is sent at once, so nothing waits for company; under load one
// write, one read and one script call carry many decisions, for this process
// and for Redis. One batch is in flight at a time: the calls that arrive
// during its round trip make the next, fuller one. Redis's cost is mostly
// per round trip (waking, reading the command, the script's setup, writing
// the reply; bench/RESULTS.md, "Redis CPU per decision"), so fewer, fuller
// batches cost it less per decision.
//
// On a Redis Cluster a batch is split by hash slot (decideCluster): an
// Ask's Group places its windows in its group's slot, where its guard must
// be too.
type Redis struct {
	client   redis.UniversalClient
	fallback *Memory
	log      *slog.Logger
	timeout  time.Duration
	pause    time.Duration
	// linger is how long a busy worker waits for a batch to fill (gather).
	linger time.Duration

	calls     chan *allowCall
	sendMu    sync.RWMutex // held to send on calls; closed set under it
	closed    bool
	quit      chan struct{}
	closeOnce sync.Once
	workers   sync.WaitGroup

	// testNowMS, set by tests only, replaces Redis's clock.
	testNowMS func() int64

	// cluster: client is a Redis Cluster's (NewRedis); a batch is split
	// by hash slot (decide).
	cluster bool

	fallbacks     atomic.Int64
	refusals      refusals
	localRefusals atomic.Int64
	mu            sync.Mutex
	down          bool          // decisions go to the fallback until the probe sees Redis again
	wentDown      chan struct{} // wakes the probe (room for one signal)
}

// Linger is how long a busy limiter waits for more decisions to join a
// batch before sending it (gather).
const Linger = 100 * time.Microsecond

const (
	batchWorkers = 1  // batches in flight at once (Redis)
	maxBatch     = 64 // decisions per batch
)

// windowKeys names a key's window in Redis: the log of older runs and the
// win string (allowScript). One hash tag keeps both in one slot: on a
// cluster the group's, when there is one (Ask.Group), else the key's own.
// (Release 1.2's form used ":runs" and ":meta": the two forms never read
// each other's windows.)
func (r *Redis) windowKeys(key, group string) (log, win string) {
	tag := "{agentapi:rl:" + key + "}"
	if r.cluster && group != "" {
		tag = "agentapi:rl:{" + group + "}:" + key
	}
	return tag + ":log", tag + ":win"
}

// allowCall is one Allow waiting for its batch; pooled, done has room for
// the one signal its worker sends when vals and err are set.
type allowCall struct {
	keys  []string
	limit int
	nowMS int64 // 0: Redis's clock
	guard Guard
	vals  []int64
	err   error
	done  chan struct{}
}

var callPool = sync.Pool{New: func() any { return &allowCall{keys: make([]string, 2), done: make(chan struct{}, 1)} }}

// NewRedis returns a limiter on client, falling back to fallback. Close
// stops its workers.
func NewRedis(client redis.UniversalClient, fallback *Memory, log *slog.Logger) *Redis {
	r := &Redis{client: client, fallback: fallback, log: cmp.Or(log, slog.New(slog.DiscardHandler)),
		timeout: 250 * time.Millisecond, pause: time.Second, linger: Linger,
		calls: make(chan *allowCall, 1024), quit: make(chan struct{}), wentDown: make(chan struct{}, 1)}
	_, r.cluster = client.(*redis.ClusterClient)
	for range batchWorkers {
		r.workers.Add(1)
		go r.work()
	}
	r.workers.Add(1)
	go r.probe()
	return r
}

// Close stops the workers once the batches in flight are answered; Allow
// decides in the fallback from then on.
func (r *Redis) Close() {
	r.closeOnce.Do(func() {
		r.sendMu.Lock()
		r.closed = true
		r.sendMu.Unlock()
		close(r.quit)
	})
	r.workers.Wait()
}

// errWindow is a decision the script could not make: the key's window in
// Redis holds something else (logged in Redis's own log).
var errWindow = errors.New("rate-limit script could not use this key's window")

// errClosed answers the calls still queued when the limiter closes.
var errClosed = errors.New("rate limiter closed")

// errDown answers the calls of a batch that was not sent, as Redis had
// failed while it waited.
var errDown = errors.New("redis unavailable")

// Fallbacks counts the decisions made in process because Redis failed.
func (r *Redis) Fallbacks() int64 { return r.fallbacks.Load() }

// Guard makes a decision conditional on what another Redis key holds, in
// the decision's own script call: the decision is made, and recorded, only
// when Key holds Want (an absent key reads as -1). Read names a key whose
// value comes back with the decision. Either may be "" (none). On a Redis
// Cluster both must hash to the slot of the Ask's Group.
type Guard struct {
	Key  string
	Want int64
	Read string
}

// Ask is one decision: Limit for Key, its windows kept with Group's (on a
// Redis Cluster, one slot per group; "" for the key's own), under Guard.
type Ask struct {
	Key, Group string
	Limit      int
	Guard      Guard
}

// Verdict says what Decide learned beside the decision.
type Verdict struct {
	// Shared: Redis made the decision, or compared the guard. False when
	// the decision was made in process (Redis away, or a Memory limiter).
	Shared bool
	// Held: the guard held (or there was none) and the decision was made;
	// or a refusal Redis gave under this ceiling and guard still holds
	// (refusals), decided in process. Shared and not Held: nothing was
	// recorded, and Found is what the guard's key holds (-1 for none).
	Held  bool
	Found int64
	// Read is the value of Guard.Read, read in the decision's script call.
	Read Read
}

// Read is a key's value as the decision's script call read it: OK only
// when it was read (the decision was made in Redis); Value is then -1 when
// the key is absent.
type Read struct {
	Value int64
	OK    bool
}

// Decider is a Limiter that decides an Ask (Redis, and Memory, which
// shares nothing and compares no guard).
type Decider interface {
	Limiter
	Decide(ctx context.Context, a Ask) (Result, Verdict, error)
	// Shared reports that decisions go to a store every instance shares
	// (false while Redis is away): only then can a guard be compared.
	Shared() bool
}

// Shared reports that decisions go to Redis (Redis is not marked down).
func (r *Redis) Shared() bool { return !r.Down() }

// Down reports that Redis is marked unavailable and decisions go to the
// fallback until the probe sees it again.
func (r *Redis) Down() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.down
}

// Allow decides in Redis, or in the fallback while Redis is unavailable.
func (r *Redis) Allow(ctx context.Context, key string, limit int) (Result, error) {
	res, _, err := r.Decide(ctx, Ask{Key: key, Limit: limit})
	return res, err
}

// Decide is Allow for an Ask: in the same script call Redis compares the
// guard and decides only when it holds (Verdict), and reads Guard.Read.
// It waits for its batch, which is bounded by the limiter's timeout, not
// by ctx: the call is pooled, and only its one answer from the worker
// frees it for reuse, so the caller stays for that answer; ctx is
// consulted once it arrives.
//
// A key Redis refused for its limit under the same ceiling and guard is
// refused here, without asking Redis, until the moment Redis said a slot
// frees (refusals); the verdict is then Held, as Redis's was.
func (r *Redis) Decide(ctx context.Context, a Ask) (Result, Verdict, error) {
	sent := r.localNow()
	if res, ok := r.refusals.refused(a.Key, a.Limit, a.Guard, sent); ok {
		r.localRefusals.Add(1)
		return res, Verdict{Shared: true, Held: true, Found: a.Guard.Want}, nil
	}
	vals, err := r.ask(a)
	if err != nil {
		// The worker marked Redis down when it failed (errClosed,
		// errDown: it was not asked; errWindow: Redis answered, only this
		// key's window is unusable and Redis logs why, so the limiter
		// stays up for every other key).
		if ctx.Err() != nil && !errors.Is(err, errClosed) && !errors.Is(err, errDown) && !errors.Is(err, errWindow) {
			return Result{}, Verdict{}, ctx.Err() // the caller went away
		}
		r.fallbacks.Add(1)
		res, err := r.fallback.Allow(ctx, fallbackKey(a.Key, a.Group), a.Limit)
		return res, Verdict{}, err
	}
	if vals[0] == -2 {
		return Result{}, Verdict{Shared: true, Found: vals[1]}, nil
	}
	v := Verdict{Shared: true, Held: true, Found: a.Guard.Want}
	if a.Guard.Read != "" {
		v.Read = Read{Value: vals[5], OK: true}
	}
	res := scriptResult(vals, a.Limit)
	r.refusals.note(a.Key, a.Limit, a.Guard, res, sent, time.Duration(vals[3]-vals[4])*time.Millisecond)
	return res, v, nil
}

// localNow is the clock refusals are placed on: the test clock when one
// replaces Redis's.
func (r *Redis) localNow() time.Time {
	if r.testNowMS != nil {
		return time.UnixMilli(r.testNowMS())
	}
	return time.Now()
}

// LocalRefusals counts the requests refused in process under a refusal
// Redis gave (refusals).
func (r *Redis) LocalRefusals() int64 { return r.localRefusals.Load() }

// ask has a worker decide in Redis and returns the script's values;
// errDown or errClosed, without asking, while Redis is marked down or the
// limiter closed.
func (r *Redis) ask(a Ask) ([]int64, error) {
	if r.Down() {
		return nil, errDown
	}
	c := callPool.Get().(*allowCall)
	c.keys[0], c.keys[1] = r.windowKeys(a.Key, a.Group)
	c.limit, c.nowMS, c.guard = a.Limit, 0, a.Guard
	if r.testNowMS != nil {
		c.nowMS = r.testNowMS()
	}
	r.sendMu.RLock()
	if r.closed {
		r.sendMu.RUnlock()
		callPool.Put(c)
		return nil, errClosed
	}
	r.calls <- c
	r.sendMu.RUnlock()
	<-c.done
	vals, err := c.vals, c.err
	c.vals, c.err = nil, nil
	callPool.Put(c)
	return vals, err
}

func scriptResult(vals []int64, limit int) Result {
	allowed, total, oldest, freeAt, now := vals[0] == 1, vals[1], vals[2], vals[3], vals[4]
	return result(allowed, limit, total, now, oldest, freeAt)
}

// work sends batches: it waits for one call, takes whatever else is
// already waiting (up to maxBatch), and answers them all with one script
// call.
func (r *Redis) work() {
	defer r.workers.Done()
	batch := make([]*allowCall, 0, maxBatch)
	keys := make([]string, 0, 4*maxBatch)
	args := make([]any, 0, 1+4*maxBatch)
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	busy := false // the last batch had company
	for {
		select {
		case c := <-r.calls:
			batch = r.fill(append(batch[:0], c))
		case <-r.quit:
			r.drain()
			return
		}
		if busy && len(batch) < maxBatch && r.linger > 0 {
			batch = r.gather(batch, wait)
		}
		busy = len(batch) > 1
		if r.Down() {
			// Redis failed while this batch waited (the batch before it
			// found it gone): its calls go to the fallback now rather
			// than wait out a time-out of their own.
			for _, c := range batch {
				c.err = errDown
			}
		} else {
			keys, args = r.decide(batch, keys, args)
		}
		for i, c := range batch {
			c.done <- struct{}{}
			batch[i] = nil
		}
	}
}

// gather waits up to the limiter's linger for more calls to join batch
// (up to maxBatch): under load, a decision sent a little later in a fuller
// batch costs Redis far less (its cost is mostly per call), and no user
// feels the wait. Only a worker whose last batch had company lingers, so a
// lone request is sent at once.
func (r *Redis) gather(batch []*allowCall, wait *time.Timer) []*allowCall {
	wait.Reset(r.linger)
	defer wait.Stop()
	for len(batch) < maxBatch {
		select {
		case c := <-r.calls:
			batch = append(batch, c)
		case <-wait.C:
			return batch
		case <-r.quit:
			return batch
		}
	}
	return batch
}

// fill adds to batch the calls already waiting, up to maxBatch.
func (r *Redis) fill(batch []*allowCall) []*allowCall {
	for len(batch) < maxBatch {
		select {
		case c := <-r.calls:
			batch = append(batch, c)
		default:
			return batch
		}
	}
	return batch
}

// drain answers the calls still queued once quit closed: nothing is sent
// after it (Close sets closed first, under sendMu).
func (r *Redis) drain() {
	for {
		select {
		case c := <-r.calls:
			c.err = errClosed
			c.done <- struct{}{}
		default:
			return
		}
	}
}

// decide answers a batch with one script call, setting each call's vals
// or err; keys and args are scratch space, returned for reuse. On a Redis
// Cluster the batch is split by hash slot (decideCluster).
func (r *Redis) decide(batch []*allowCall, keys []string, args []any) ([]string, []any) {
	if r.cluster {
		r.decideCluster(batch)
		return keys, args
	}
	keys, args = scriptArgs(batch, keys, args)
	vals, err := r.run(allowScript, r.timeout, keys, args)
	if err != nil {
		r.markDown(err)
	}
	answer(batch, vals, err)
	clear(args) // drop the boxed values
	return keys, args
}

// decideCluster answers a batch on a Redis Cluster: one script call per
// hash slot (a script's keys must share one), the calls of one slot in the
// batch's order, all sent in one pipeline, which the cluster client sends
// to each primary in one round trip, the primaries at once. A call that
// fails sends only its decisions to the fallback: the accounts of a
// primary that is away fall back, the others do not notice.
func (r *Redis) decideCluster(batch []*allowCall) {
	groups := slotGroups(batch)
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	pipe := r.client.Pipeline()
	cmds := make([]*redis.Cmd, len(groups))
	sent := make([][2]any, len(groups))
	for i, g := range groups {
		keys, args := scriptArgs(g, nil, nil)
		cmds[i], sent[i] = allowScript.EvalSha(ctx, pipe, keys, args...), [2]any{keys, args}
	}
	_, _ = pipe.Exec(ctx)
	for i, g := range groups {
		vals, err := cmds[i].Int64Slice()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// A primary that does not know the script yet (new, restarted
			// or flushed): sent again by its source.
			vals, err = r.run(allowScript, r.timeout, sent[i][0].([]string), sent[i][1].([]any))
		}
		answer(g, vals, err)
		if err != nil {
			r.fellBack() // its primary is away: the probe merges back
		}
	}
}

// fellBack wakes the probe (markDown also marks Redis down first).
func (r *Redis) fellBack() {
	select {
	case r.wentDown <- struct{}{}:
	default: // already signalled
	}
}

// slotGroups splits batch by the hash slot of each call's window, keeping
// the batch's order within each group.
func slotGroups(batch []*allowCall) [][]*allowCall {
	var groups [][]*allowCall
	index := map[uint16]int{}
	for _, c := range batch {
		s := keySlot(c.keys[1])
		i, ok := index[s]
		if !ok {
			i = len(groups)
			index[s] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], c)
	}
	return groups
}

// scriptArgs appends allowScript's keys and arguments for batch to
// keys[:0] and args[:0].
func scriptArgs(batch []*allowCall, keys []string, args []any) ([]string, []any) {
	keys, args = keys[:0], append(args[:0], windowMS)
	for _, c := range batch {
		// A guard or read that is not asked for: the win key stands in
		// (the script does not read it for them).
		guard, read, flags := c.keys[1], c.keys[1], 0
		if c.guard.Key != "" {
			guard, flags = c.guard.Key, 1
		}
		if c.guard.Read != "" {
			read, flags = c.guard.Read, flags|2
		}
		keys = append(keys, c.keys[0], c.keys[1], guard, read)
		args = append(args, c.limit, c.nowMS, c.guard.Want, flags)
	}
	return keys, args
}

// answer sets each call's vals or err from the script's values for batch.
func answer(batch []*allowCall, vals []int64, err error) {
	if err == nil && len(vals) != decisionValues*len(batch) {
		err = fmt.Errorf("rate-limit script returned %d values for %d decisions", len(vals), len(batch))
	}
	for i, c := range batch {
		switch {
		case err != nil:
			c.err = err
		case vals[decisionValues*i] == -1:
			c.err = errWindow
		default:
			j := decisionValues * i
			c.vals = vals[j : j+decisionValues : j+decisionValues]
		}
	}
}

// decisionValues is how many integers allowScript returns per decision.
const decisionValues = 6

// run runs a script by hash within timeout (Script.Run: by its source when
// Redis does not know it, after a restart or a flush).
func (r *Redis) run(script *redis.Script, timeout time.Duration, keys []string, args []any) ([]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return script.Run(ctx, r.client, keys, args...).Int64Slice()
}

// Bounds of one merge call (syncFallback): keys, and runs in all (a key's
// runs go in one call, however many).
const (
	mergeKeys    = 64
	mergeRuns    = 4096
	mergeTimeout = 2 * time.Second
)

// syncFallback adds the admissions made in process that Redis has not been
// told of to the keys' windows in Redis, a batch of keys per call (on a
// cluster, of one slot per call). When a call fails, the admissions it
// carried stay unsynced, for the next return; on one Redis the rest too
// (it is away). Only the probe calls it, while no request waits on Redis.
func (r *Redis) syncFallback() error {
	nowMS, pending := r.fallback.takeUnsynced()
	if r.cluster {
		slices.SortStableFunc(pending, func(a, b unsynced) int { return cmp.Compare(r.fallbackSlot(a.key), r.fallbackSlot(b.key)) })
	}
	var errs []error
	for start := 0; start < len(pending); {
		end := r.mergeChunk(pending, start)
		if err := r.merge(nowMS, pending[start:end]); err != nil {
			if !r.cluster {
				r.restore(pending[start:])
				return err
			}
			r.restore(pending[start:end])
			errs = append(errs, err)
		}
		// A key whose window holds something else (-1) is decided in
		// process anyway (errWindow).
		start = end
	}
	return errors.Join(errs...)
}

// mergeChunk is the end of the chunk of pending that starts at start: up
// to mergeKeys keys and mergeRuns runs (a key's runs go in one call,
// however many), all of one slot on a cluster.
func (r *Redis) mergeChunk(pending []unsynced, start int) int {
	end, runs := start+1, len(pending[start].runs)
	for end < len(pending) && end-start < mergeKeys && runs+len(pending[end].runs) <= mergeRuns &&
		(!r.cluster || r.fallbackSlot(pending[end].key) == r.fallbackSlot(pending[start].key)) {
		runs += len(pending[end].runs)
		end++
	}
	return end
}

// merge tells Redis the admissions of chunk (mergeScript).
func (r *Redis) merge(nowMS int64, chunk []unsynced) error {
	keys, args := make([]string, 0, 2*len(chunk)), []any{windowMS, int64(0)}
	if r.testNowMS != nil {
		args[1] = r.testNowMS()
	}
	for _, p := range chunk {
		key, group := splitFallbackKey(p.key)
		runsKey, metaKey := r.windowKeys(key, group)
		keys = append(keys, runsKey, metaKey)
		args = append(args, mergeRunsArg(nowMS, p.runs))
	}
	_, err := r.run(mergeScript, mergeTimeout, keys, args)
	return err
}

// restore counts the admissions of pending as not told again.
func (r *Redis) restore(pending []unsynced) {
	for _, p := range pending {
		var n int64
		for _, e := range p.runs {
			n += int64(e.count)
		}
		r.fallback.restoreUnsynced(p.key, n)
	}
}

// fallbackSlot is the hash slot of the windows of a fallback key.
func (r *Redis) fallbackSlot(fk string) uint16 {
	key, group := splitFallbackKey(fk)
	_, win := r.windowKeys(key, group)
	return keySlot(win)
}

// fallbackKey is the fallback's key for a decision of key in group: the
// group travels with it, so that the admissions go back to the windows
// they belong to (syncFallback).
func fallbackKey(key, group string) string {
	if group == "" {
		return key
	}
	return group + "\x00" + key
}

func splitFallbackKey(k string) (key, group string) {
	if g, key, ok := strings.Cut(k, "\x00"); ok {
		return key, g
	}
	return k, ""
}

// mergeRunsArg is runs as mergeScript reads them: "age:count" each, ages
// in milliseconds before nowMS, comma-separated.
func mergeRunsArg(nowMS int64, runs []entry) string {
	var b strings.Builder
	for i, e := range runs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(max(nowMS-e.ms, 0), 10))
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(uint64(e.count), 10))
	}
	return b.String()
}

// markDown sends decisions to the fallback and wakes the probe, which alone
// tries Redis again.
func (r *Redis) markDown(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.down {
		r.log.Warn("rate limiter: redis unavailable, using the in-process fallback", "err", err)
	}
	r.down = true
	r.fellBack()
}

func (r *Redis) markUp() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		r.log.Info("rate limiter: redis is back")
		r.down = false
	}
}

// probe waits for Redis to be marked down, then tries it every pause until
// it decides again and sends decisions back to it; it stops when the
// limiter closes.
func (r *Redis) probe() {
	defer r.workers.Done()
	for {
		select {
		case <-r.quit:
			return
		case <-r.wentDown:
		}
		up := r.pingUntilUp
		if r.cluster {
			up = r.mergeUntilSynced
		}
		if !up() {
			return
		}
	}
}

// mergeUntilSynced is the probe on a cluster, where the keys of a primary
// that is away fall back and the others do not (decideCluster): every
// pause it tells the primaries the admissions made in process, until
// none is left untold. It returns false when the limiter closed first.
func (r *Redis) mergeUntilSynced() bool {
	t := time.NewTicker(r.pause)
	defer t.Stop()
	for {
		select {
		case <-r.quit:
			return false
		case <-t.C:
		}
		if r.syncFallback() == nil && !r.fallback.hasUnsynced() {
			return true
		}
	}
}

// pingUntilUp returns true once Redis decided again (and decisions went
// back to it), false when the limiter closed first. The probe is a real
// decision, on a key of its own: a Redis that answers PING but refuses the
// script (a read-only replica, a full memory) is not back.
func (r *Redis) pingUntilUp() bool {
	t := time.NewTicker(r.pause)
	defer t.Stop()
	runs, meta := r.windowKeys(probeKey, "")
	keys, args := []string{runs, meta, meta, meta}, []any{windowMS, maxProbeLimit, 0, -1, 0}
	for {
		select {
		case <-r.quit:
			return false
		case <-t.C:
		}
		if _, err := r.run(allowScript, r.timeout, keys, args); err != nil {
			continue
		}
		// Redis decides again: first it learns what this instance
		// admitted meanwhile, then decisions go back to it, then it
		// learns the few admitted in process while they went.
		if err := r.syncFallback(); err != nil {
			continue
		}
		r.markUp()
		if err := r.syncFallback(); err != nil {
			r.markDown(err)
		}
		return true
	}
}

// probeKey is the window the probe decides on; it expires a second after
// the window, like any idle key's.
const (
	probeKey      = "agentapi-probe"
	maxProbeLimit = 1 << 30
)

// Client is the Redis client the limiter decides with.
func (r *Redis) Client() redis.UniversalClient { return r.client }
