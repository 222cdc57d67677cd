package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// redisCPU is Redis's own CPU so far (INFO cpu: used_cpu_sys plus
// used_cpu_user): it counts what the decisions cost Redis, whatever else
// the machine runs.
func redisCPU(b *testing.B, l *Redis) time.Duration { return nodeCPU(b, l.Client()) }

// benchDecisions has conc callers make b.N decisions in all, as GET /v1/me
// does (AllowAt under the mirror's epoch), over keys keys, each refused
// past limit; it reports Redis's CPU per decision. Run it on a Redis of
// its own (AGENTAPI_TEST_REDIS_URL): INFO counts every client's work.
func benchDecisions(b *testing.B, conc, keys, limit int) {
	l, guard := newGuardedB(b)
	names := make([]string, keys)
	for i := range names {
		names[i] = uniqueKey()
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 := redisCPU(b, l)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if _, _, err := l.Decide(context.Background(), Ask{Key: names[int(i)%keys], Limit: limit, Guard: guard}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	cpu := redisCPU(b, l) - cpu0
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "redis-µs/decision")
}

// newGuardedB is a limiter and the guard a request's decision carries
// (a key epoch mirror that holds 1).
func newGuardedB(b *testing.B) (*Redis, Guard) {
	c := redisClient(b)
	l := NewRedis(c, NewMemory(nil), nil)
	b.Cleanup(l.Close)
	g := Guard{Key: "agentapi:guard:" + uniqueKey(), Want: 1}
	if err := c.Set(context.Background(), g.Key, 1, time.Hour).Err(); err != nil {
		b.Fatal(err)
	}
	return l, g
}

func BenchmarkRedisCPUAdmitted(b *testing.B) { benchDecisions(b, 16, 100, 1<<30) }
func BenchmarkRedisCPUOneByOne(b *testing.B) { benchDecisions(b, 1, 100, 1<<30) }
func BenchmarkRedisCPURefused(b *testing.B)  { benchDecisions(b, 16, 1, 10) }

func BenchmarkRedisCPUHotKey(b *testing.B) { benchDecisions(b, 16, 1, 1<<30) }

// benchScript sends batches of size decisions over keys keys straight to
// the script: Redis's cost per decision with the round trip's shared size
// ways, what the script itself costs.
func benchScript(b *testing.B, keys, size int) {
	l, guard := newGuardedB(b)
	names := make([]string, keys)
	for i := range names {
		names[i] = uniqueKey()
	}
	batch := make([]*allowCall, size)
	b.ResetTimer()
	cpu0 := redisCPU(b, l)
	var ks []string
	var args []any
	for i := 0; i < b.N; i += len(batch) {
		for j := range batch {
			log, win := l.windowKeys(names[(i+j)%keys], "")
			batch[j] = &allowCall{keys: []string{log, win}, limit: 1 << 30, guard: guard}
		}
		ks, args = l.decide(batch, ks, args)
		if batch[0].err != nil {
			b.Fatal(batch[0].err)
		}
	}
	cpu := redisCPU(b, l) - cpu0
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "redis-µs/decision")
}

func BenchmarkRedisScriptHotKey(b *testing.B)   { benchScript(b, 1, 64) }
func BenchmarkRedisScriptManyKeys(b *testing.B) { benchScript(b, 1000, 64) }
func BenchmarkRedisScriptBatch1(b *testing.B)   { benchScript(b, 1, 1) }
func BenchmarkRedisScriptBatch8(b *testing.B)   { benchScript(b, 1, 8) }
