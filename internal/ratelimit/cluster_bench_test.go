package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/testenv"
)

// nodeCPU is one Redis node's own CPU so far (INFO cpu).
func nodeCPU(b *testing.B, c redis.UniversalClient) time.Duration {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var secs float64
	for _, line := range strings.Split(info, "\n") {
		name, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			f, _ := strconv.ParseFloat(v, 64)
			secs += f
		}
	}
	return time.Duration(secs * float64(time.Second))
}

// BenchmarkClusterRedisCPU: 16 callers of one instance make b.N decisions
// over 1,000 keys on a 3-primary cluster; it reports, for each primary,
// its share of the decisions and its CPU per decision it made (the
// capacity plan's figure, docs/production.md).
func BenchmarkClusterRedisCPU(b *testing.B) {
	cl := testenv.RedisCluster(b)
	c, err := NewClient(cl.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	l := NewRedis(c, NewMemory(nil), nil)
	defer l.Close()
	names, owner := clusterKeys(b, cl, 1000)
	direct := make([]*redis.Client, len(cl.Addrs))
	for i, a := range cl.Addrs {
		direct[i] = redis.NewClient(&redis.Options{Addr: a})
		defer direct[i].Close()
	}
	made := make([]atomic.Int64, len(cl.Addrs))
	b.ResetTimer()
	cpu0 := make([]time.Duration, len(direct))
	for i, d := range direct {
		cpu0[i] = nodeCPU(b, d)
	}
	clusterDecisions(b, l, names, owner, made)
	for i, d := range direct {
		n := made[i].Load()
		cpu := nodeCPU(b, d) - cpu0[i]
		b.ReportMetric(float64(n)/float64(b.N)*100, fmt.Sprintf("%%decisions-p%d", i+1))
		if n > 0 {
			b.ReportMetric(float64(cpu.Microseconds())/float64(n), fmt.Sprintf("redis-µs/decision-p%d", i+1))
		}
	}
	if l.Fallbacks() != 0 {
		b.Fatalf("%d decisions fell back", l.Fallbacks())
	}
}

// clusterKeys is n new keys and, for each, the index in cl.Addrs of the
// primary holding its window.
func clusterKeys(b *testing.B, cl *testenv.Cluster, n int) (names []string, owner []int) {
	cc := cl.Client()
	names, owner = make([]string, n), make([]int, n)
	for i := range names {
		names[i] = uniqueKey()
		_, win := (&Redis{cluster: true}).windowKeys(names[i], "")
		node, err := cc.MasterForKey(context.Background(), win)
		if err != nil {
			b.Fatal(err)
		}
		owner[i] = slices.Index(cl.Addrs, node.Options().Addr)
	}
	return names, owner
}

// clusterDecisions has 16 callers make b.N decisions in all over names,
// counting in made those of each primary (owner).
func clusterDecisions(b *testing.B, l *Redis, names []string, owner []int, made []atomic.Int64) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				k := int(i) % len(names)
				if _, err := l.Allow(context.Background(), names[k], 1<<30); err != nil {
					b.Error(err)
					return
				}
				made[owner[k]].Add(1)
			}
		}()
	}
	wg.Wait()
}
