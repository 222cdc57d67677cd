package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// allowScript decides one request atomically inside Redis, on Redis's own
// clock so instances with skewed clocks agree. The window is the same
// run-length log as Memory's: a list of "ms:count" entries, oldest first,
// and a running total; both expire when the key is idle.
//
// KEYS[1] log, KEYS[2] total; ARGV[1] limit, ARGV[2] window ms.
// Returns {allowed, total, oldest ms or -1, free-at ms, now ms}.
var allowScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local total = tonumber(redis.call('GET', KEYS[2]) or '0')
local function parse(e)
  local sep = string.find(e, ':', 1, true)
  return tonumber(string.sub(e, 1, sep - 1)), tonumber(string.sub(e, sep + 1))
end
while true do
  local head = redis.call('LINDEX', KEYS[1], 0)
  if not head then total = 0 break end
  local ms, c = parse(head)
  if ms > now - window then break end
  redis.call('LPOP', KEYS[1])
  total = total - c
end
local allowed = 0
local freeAt = now
if total < limit then
  allowed = 1
  total = total + 1
  local tail = redis.call('LINDEX', KEYS[1], -1)
  local tms, tc
  if tail then tms, tc = parse(tail) end
  if tail and tms >= now then
    redis.call('LSET', KEYS[1], -1, tms .. ':' .. (tc + 1))
  else
    redis.call('RPUSH', KEYS[1], now .. ':1')
  end
else
  local need = total - limit + 1
  local freed = 0
  local i = 0
  while freed < need do
    local batch = redis.call('LRANGE', KEYS[1], i, i + 99)
    if #batch == 0 then break end
    for _, e in ipairs(batch) do
      local ms, c = parse(e)
      freed = freed + c
      if freed >= need then freeAt = ms + window break end
    end
    i = i + 100
  end
end
redis.call('SET', KEYS[2], total, 'PX', window + 1000)
redis.call('PEXPIRE', KEYS[1], window + 1000)
local oldest = -1
local head = redis.call('LINDEX', KEYS[1], 0)
if head then oldest = parse(head) end
return {allowed, total, oldest, freeAt, now}
`)

// Redis is the limiter shared by every instance. When Redis fails it
// decides with an in-process fallback at the full ceiling: degraded (each
// instance admits up to N on its own), never unlimited; it logs the change
// once and tries Redis again after a short pause, by itself.
type Redis struct {
	client   redis.UniversalClient
	fallback *Memory
	log      *slog.Logger
	timeout  time.Duration
	pause    time.Duration

	fallbacks atomic.Int64
	mu        sync.Mutex
	down      bool
	retryAt   time.Time
}

// NewRedis returns a limiter on client, falling back to fallback.
func NewRedis(client redis.UniversalClient, fallback *Memory, log *slog.Logger) *Redis {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Redis{client: client, fallback: fallback, log: log, timeout: 250 * time.Millisecond, pause: time.Second}
}

// Fallbacks counts the decisions made in process because Redis failed.
func (r *Redis) Fallbacks() int64 { return r.fallbacks.Load() }

// Allow decides in Redis, or in the fallback while Redis is unavailable.
func (r *Redis) Allow(ctx context.Context, key string, limit int) (Result, error) {
	if r.skipRedis() {
		r.fallbacks.Add(1)
		return r.fallback.Allow(ctx, key, limit)
	}
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	tag := "{agentapi:rl:" + key + "}"
	vals, err := allowScript.Run(cctx, r.client, []string{tag + ":log", tag + ":total"}, limit, windowMS).Int64Slice()
	if err == nil && len(vals) != 5 {
		err = fmt.Errorf("rate-limit script returned %d values", len(vals))
	}
	if err != nil {
		if ctx.Err() != nil { // the caller went away: not Redis's fault
			return Result{}, ctx.Err()
		}
		r.markDown(err)
		r.fallbacks.Add(1)
		return r.fallback.Allow(ctx, key, limit)
	}
	r.markUp()
	allowed, total, oldest, freeAt, now := vals[0] == 1, vals[1], vals[2], vals[3], vals[4]
	return result(allowed, limit, total, now, oldest, freeAt), nil
}

func (r *Redis) skipRedis() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.down && time.Now().Before(r.retryAt)
}

func (r *Redis) markDown(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.down {
		r.log.Warn("rate limiter: redis unavailable, using the in-process fallback", "err", err)
	}
	r.down, r.retryAt = true, time.Now().Add(r.pause)
}

func (r *Redis) markUp() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		r.log.Info("rate limiter: redis is back")
		r.down = false
	}
}
