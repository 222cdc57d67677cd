package ratelimit

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/testenv"
)

// clusterLimiter is one instance's limiter on cl, through --redis's
// redis+cluster:// URL.
func clusterLimiter(t *testing.T, cl *testenv.Cluster) *Redis {
	t.Helper()
	c, err := NewClient(cl.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*redis.ClusterClient); !ok {
		t.Fatalf("%s gave a %T", cl.URL(), c)
	}
	t.Cleanup(func() { c.Close() })
	return newRedis(t, c, NewMemory(nil), nil)
}

// keysByPrimary returns n keys for each primary of cl, by where their
// windows live.
func keysByPrimary(t *testing.T, cl *testenv.Cluster, n int) map[string][]string {
	t.Helper()
	cc := cl.Client()
	out := map[string][]string{}
	for full := 0; full < len(cl.Addrs); {
		k := uniqueKey()
		_, win := (&Redis{cluster: true}).windowKeys(k, "")
		node, err := cc.MasterForKey(context.Background(), win)
		if err != nil {
			t.Fatal(err)
		}
		addr := node.Options().Addr
		if len(out[addr]) < n {
			out[addr] = append(out[addr], k)
			if len(out[addr]) == n {
				full++
			}
		}
	}
	return out
}

// hammer makes calls requests for each key, alternating between the
// limiters, all at once, and returns how many each key was admitted; a
// decision that fails fails the test.
func hammer(t *testing.T, lims []*Redis, keys []string, limit, calls int) map[string]int64 {
	t.Helper()
	counts := make([]atomic.Int64, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		for j := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := lims[j%len(lims)].Allow(context.Background(), k, limit)
				if err != nil {
					t.Errorf("key %s: %v", k, err)
					return
				}
				if res.Allowed {
					counts[i].Add(1)
				}
			}()
		}
	}
	wg.Wait()
	out := map[string]int64{}
	for i, k := range keys {
		out[k] = counts[i].Load()
	}
	return out
}

// TestClusterExactAcrossInstances: two instances on a 3-primary cluster
// admit each key exactly its limit, keys on every primary at once (one
// script call per slot in a batch, never a cross-slot call), and never
// fall back.
func TestClusterExactAcrossInstances(t *testing.T) {
	cl := testenv.RedisCluster(t)
	lims := []*Redis{clusterLimiter(t, cl), clusterLimiter(t, cl)}
	var keys []string
	for _, ks := range keysByPrimary(t, cl, 8) {
		keys = append(keys, ks...)
	}
	const limit = 10
	for k, n := range hammer(t, lims, keys, limit, 30) {
		if n != limit {
			t.Errorf("key %s admitted %d times, want exactly %d", k, n, limit)
		}
	}
	if f := lims[0].Fallbacks() + lims[1].Fallbacks(); f != 0 {
		t.Fatalf("%d decisions fell back on a healthy cluster", f)
	}
}

// TestClusterPrimaryKilled: a primary killed with SIGKILL: its keys are
// decided by each instance's own limiter (no error, at most the limit per
// instance), the keys of the other primaries stay exact in Redis; once it
// is back, the admissions made in process are merged into its windows and
// its keys are decided in Redis again, exactly.
func TestClusterPrimaryKilled(t *testing.T) {
	cl := testenv.RedisCluster(t)
	lims := []*Redis{clusterLimiter(t, cl), clusterLimiter(t, cl)}
	byPrimary := keysByPrimary(t, cl, 6)
	// Each instance has decided on every primary before one dies.
	for _, ks := range keysByPrimary(t, cl, 1) {
		hammer(t, lims, ks, 1000, 2)
	}
	dead := cl.Addrs[1]
	cl.Kill(1)
	var living []string
	for addr, ks := range byPrimary {
		if addr != dead {
			living = append(living, ks...)
		}
	}
	const limit = 10
	during := hammer(t, lims, append(living, byPrimary[dead]...), limit, 30)
	for k, n := range during {
		switch {
		case contains(byPrimary[dead], k) && (n < limit || n > int64(len(lims))*limit):
			t.Errorf("key %s of the dead primary admitted %d times, want %d to %d (each instance's own limit)", k, n, limit, len(lims)*limit)
		case !contains(byPrimary[dead], k) && n != limit:
			t.Errorf("key %s of a living primary admitted %d times, want exactly %d", k, n, limit)
		}
	}
	cl.Restart(1)
	waitUntil(t, "the restarted primary deciding again", func() bool {
		before := lims[0].Fallbacks()
		res, err := lims[0].Allow(context.Background(), uniqueKeyOn(t, cl, dead), 5)
		return err == nil && res.Allowed && lims[0].Fallbacks() == before
	})
	for _, k := range byPrimary[dead] {
		waitUntil(t, "the admissions made in process merged into the restarted primary", func() bool {
			return windowTotal(t, cl, k) == during[k]
		})
	}
	keys := byPrimary[dead][:0:0]
	for range 6 {
		keys = append(keys, uniqueKeyOn(t, cl, dead))
	}
	before := lims[0].Fallbacks() + lims[1].Fallbacks()
	for k, n := range hammer(t, lims, keys, limit, 30) {
		if n != limit {
			t.Errorf("after the restart, key %s admitted %d times, want exactly %d", k, n, limit)
		}
	}
	if f := lims[0].Fallbacks() + lims[1].Fallbacks() - before; f != 0 {
		t.Fatalf("%d decisions fell back after the primary came back", f)
	}
}

// windowTotal is what key's window in the cluster counts (0: none).
func windowTotal(t *testing.T, cl *testenv.Cluster, key string) int64 {
	t.Helper()
	_, win := (&Redis{cluster: true}).windowKeys(key, "")
	v, err := cl.Client().Get(context.Background(), win).Result()
	if err != nil {
		return 0
	}
	total, _, _ := strings.Cut(v, ":")
	n, _ := strconv.ParseInt(total, 10, 64)
	return n
}

func contains(ks []string, k string) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// uniqueKeyOn is a new key whose windows live on the primary at addr.
func uniqueKeyOn(t *testing.T, cl *testenv.Cluster, addr string) string {
	t.Helper()
	cc := cl.Client()
	for {
		k := uniqueKey()
		_, win := (&Redis{cluster: true}).windowKeys(k, "")
		node, err := cc.MasterForKey(context.Background(), win)
		if err != nil {
			t.Fatal(err)
		}
		if node.Options().Addr == addr {
			return k
		}
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not seen: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
