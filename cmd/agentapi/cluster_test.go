package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
)

// TestClusterPrimaryKilledUnderLoad: two instances on a 3-primary Redis
// Cluster; a primary is killed with SIGKILL while keys of accounts on
// every primary are in use: no request fails (200 or 429, never 500); a
// key revoked then is refused on every instance's very next request,
// whether its account's primary is the dead one (the command keeps the
// change and exits 1: its mirror could not be raised) or a live one; and
// once the primary is back every key is served as before.
func TestClusterPrimaryKilledUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two servers and a cluster")
	}
	cl := testenv.RedisCluster(t)
	db := storetest.PostgresURL(t)
	servers := []*server{
		startServer(t, nil, "--db", db, "--redis", cl.URL()),
		startServer(t, nil, "--db", db, "--redis", cl.URL()),
	}
	accts := clusterAccounts(t, db, cl)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	failures := make(chan string, 100)
	for i, a := range accts {
		for j, cred := range a.creds[1:] {
			wg.Go(func() { clusterLoad(t, servers[(i+j)%2].base, cred, stop, failures) })
		}
	}
	time.Sleep(200 * time.Millisecond)
	cl.Kill(1)
	time.Sleep(500 * time.Millisecond)
	for _, a := range []clusterAccount{accts[0], accts[1]} { // on the dead primary, on a live one
		clusterRevoke(t, db, cl.URL(), a, servers)
	}
	time.Sleep(500 * time.Millisecond)
	cl.Restart(1)
	close(stop)
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	for i, a := range accts {
		for _, cred := range a.creds[1:] {
			if code, _, _ := call(t, "GET", servers[i%2].base+"/v1/me", cred, ""); code != 200 {
				t.Errorf("a key of the account on primary %d after the primary came back: %d", a.primary, code)
			}
		}
	}
}

// clusterRevoke revokes a's first key with the cluster given as --redis,
// and wants it refused on every server's very next request. The command
// exits 1 when a's primary is away (its mirror could not be raised), the
// change kept.
func clusterRevoke(t *testing.T, db, redisURL string, a clusterAccount, servers []*server) {
	t.Helper()
	_, errs, code := cli(t, db, "", "key", "revoke", "--redis", redisURL, "--account", a.id, "--as", a.email, a.ids[0])
	if code != 0 && !(a.primary == 1 && code == 1 && strings.Contains(errs, "the change is saved")) {
		t.Fatalf("key revoke of an account on primary %d: exit %d: %s", a.primary, code, errs)
	}
	for _, s := range servers {
		if code, _, _ := call(t, "GET", s.base+"/v1/me", a.creds[0], ""); code != 401 {
			t.Errorf("the revoked key (account on primary %d) with a primary away: %d at %s, want 401", a.primary, code, s.base)
		}
	}
}

// clusterAccount is an account with its Owner and three keys, whose hash
// slot is on the cluster's primary numbered primary.
type clusterAccount struct {
	id, email  string
	primary    int
	ids, creds []string
}

// clusterAccounts creates accounts until every primary has one, the one
// on primary 1 (which the test kills) first.
func clusterAccounts(t *testing.T, db string, cl *testenv.Cluster) []clusterAccount {
	t.Helper()
	cc := cl.Client()
	var out []clusterAccount
	covered := map[int]bool{}
	for i := 0; i < 40 && len(covered) < len(cl.Addrs); i++ {
		id := mustCLI(t, db, "", "account", "create", "--name", fmt.Sprintf("Cluster %d", i))
		node, err := cc.MasterForKey(context.Background(), "{"+id+"}")
		if err != nil {
			t.Fatal(err)
		}
		a := clusterAccount{id: id, email: fmt.Sprintf("owner-%d@example.com", i), primary: slices.Index(cl.Addrs, node.Options().Addr)}
		if covered[a.primary] {
			continue
		}
		covered[a.primary] = true
		mustCLI(t, db, "long enough password\n", "user", "create", "--account", id, "--email", a.email, "--role", "owner")
		for range 3 {
			id, cred := clusterKey(t, db, a)
			a.ids, a.creds = append(a.ids, id), append(a.creds, cred)
		}
		out = append(out, a)
	}
	if len(covered) < len(cl.Addrs) {
		t.Fatalf("40 accounts on %d of %d primaries", len(covered), len(cl.Addrs))
	}
	// Primary 1's account first, then the others.
	rank := func(a clusterAccount) int {
		if a.primary == 1 {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(out, func(a, b clusterAccount) int { return cmp.Compare(rank(a), rank(b)) })
	return out
}

// clusterKey creates a full-access key of a with a high limit.
func clusterKey(t *testing.T, db string, a clusterAccount) (id, cred string) {
	t.Helper()
	out := mustCLI(t, db, "", "key", "create", "--account", a.id, "--as", a.email, "--name", "k", "--preset", "full-access", "--rate-limit", "100000", "--json")
	var k struct{ ID, Credential string }
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		t.Fatal(err)
	}
	return k.ID, k.Credential
}

// clusterLoad requests /v1/me with cred until stop closes, reporting any
// answer but 200 or 429.
func clusterLoad(t *testing.T, base, cred string, stop chan struct{}, failures chan<- string) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		code, _, _ := call(t, "GET", base+"/v1/me", cred, "")
		if code != 200 && code != 429 {
			select {
			case failures <- fmt.Sprintf("%s: %d under load with a primary away", base, code):
			default:
			}
		}
	}
}
