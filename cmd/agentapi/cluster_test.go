package main

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
)

// TestClusterPrimaryKilledUnderLoad: two instances on a 3-primary Redis
// Cluster; a primary is killed with SIGKILL while keys (on every primary)
// are in use: no request fails (200 or 429, never 500), a key revoked
// then is refused on every instance's very next request, and once the
// primary is back every key is served as before.
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
	acct := mustCLI(t, db, "", "account", "create", "--name", "Cluster")
	mustCLI(t, db, "long enough password\n", "user", "create", "--account", acct, "--email", "multi@example.com", "--role", "owner")
	var ids, creds []string
	for range 12 { // 12 keys: on every primary, all but surely
		id, cred := manyInstancesKey(t, db, acct, "--rate-limit", "100000")
		ids, creds = append(ids, id), append(creds, cred)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	failures := make(chan string, 100)
	for i, cred := range creds[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clusterLoad(t, servers[i%2].base, cred, stop, failures)
		}()
	}
	time.Sleep(200 * time.Millisecond)
	cl.Kill(1)
	time.Sleep(500 * time.Millisecond)
	// --redis naming the cluster, as serve is given it: accepted, no raise.
	mustCLI(t, db, "", "key", "revoke", "--redis", cl.URL(), "--account", acct, "--as", "multi@example.com", ids[0])
	for _, s := range servers {
		if code, _, _ := call(t, "GET", s.base+"/v1/me", creds[0], ""); code != 401 {
			t.Errorf("the revoked key with a primary away: %d at %s, want 401", code, s.base)
		}
	}
	time.Sleep(500 * time.Millisecond)
	cl.Restart(1)
	close(stop)
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	for i, cred := range creds[1:] {
		if code, _, _ := call(t, "GET", servers[i%2].base+"/v1/me", cred, ""); code != 200 {
			t.Errorf("key %d after the primary came back: %d", i+1, code)
		}
	}
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
