package testenv_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/testenv"
)

// TestRedisClusterSpreadsAccounts starts the 3-primary cluster and measures
// how 1,000 accounts' hash tags ({acct_…}, one slot per account: its
// windows, epoch mirror and list version) spread over the primaries: each
// holds its third within ±15 % (docs/production.md, capacity plan). It
// then kills a primary and restarts it: the cluster is ok again with
// every slot served.
func TestRedisClusterSpreadsAccounts(t *testing.T) {
	cl := testenv.RedisCluster(t)
	cc := cl.Client()
	ctx := context.Background()
	const accounts = 1000
	per := map[string]int{}
	var ids []string
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range accounts {
		id := domain.NewID(domain.PrefixAccount, now.Add(time.Duration(i)*time.Minute))
		ids = append(ids, id)
		node, err := cc.MasterForKey(ctx, "{"+id+"}:epoch")
		if err != nil {
			t.Fatal(err)
		}
		per[node.Options().Addr]++
	}
	if len(per) != testenv.ClusterPrimaries {
		t.Fatalf("accounts on %d primaries, want %d: %v", len(per), testenv.ClusterPrimaries, per)
	}
	even := float64(accounts) / testenv.ClusterPrimaries
	worst := 0.0
	for addr, n := range per {
		dev := (float64(n) - even) / even
		worst = max(worst, math.Abs(dev))
		t.Logf("primary %s: %d accounts (%+.1f %%)", addr, n, 100*dev)
	}
	if worst > 0.15 {
		t.Fatalf("spread %v: a primary is %.1f %% off its third, want within 15 %%", per, 100*worst)
	}
	cl.Kill(1)
	cl.Restart(1)
	for _, id := range ids {
		if err := cc.Set(ctx, "{"+id+"}:epoch", 1, time.Minute).Err(); err != nil {
			t.Fatalf("after the restart, %s: %v", id, err)
		}
	}
}
