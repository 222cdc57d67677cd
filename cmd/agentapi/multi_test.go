package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
)

// TestManyInstances runs three serve processes on one PostgreSQL and one
// Redis, with requests alternating between them, as production does.
func TestManyInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers")
	}
	redisURL := testenv.RedisURL(t)
	// With --redis, as production runs it (docs/production.md): the
	// command raises the key epoch's mirror the instances check.
	manyInstances(t, redisURL, "--redis", redisURL)
}

// TestManyInstancesOnCluster is TestManyInstances on a 3-primary Redis
// Cluster (--redis redis+cluster://…), the operator commands given it as
// well (docs/production.md, Redis Cluster).
func TestManyInstancesOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers and a cluster")
	}
	url := testenv.RedisCluster(t).URL()
	manyInstances(t, url, "--redis", url)
}

// manyInstances is TestManyInstances on redisURL; cliArgs are what the
// operator commands are given.
func manyInstances(t *testing.T, redisURL string, cliArgs ...string) {
	db := storetest.PostgresURL(t)
	// A fresh Redis namespace: the limiter keys by key id, which is unique
	// per test run anyway; flushing is not needed.
	var servers []*server
	for range 3 {
		servers = append(servers, startServer(t, nil, "--db", db, "--redis", redisURL))
	}
	acct := mustCLI(t, db, "", "account", "create", "--name", "Multi")
	mustCLI(t, db, "long enough password\n", "user", "create", "--account", acct, "--email", "multi@example.com", "--role", "owner")
	newKey := func(t *testing.T, args ...string) (id, cred string) {
		t.Helper()
		return manyInstancesKey(t, db, acct, args...)
	}

	t.Run("exactly N admitted across instances", func(t *testing.T) {
		const n = 20
		_, cred := newKey(t, "--rate-limit", fmt.Sprint(n))
		manyInstancesExactlyN(t, servers, cred, n)
	})

	t.Run("revocation through one instance is seen by the others", func(t *testing.T) {
		id, cred := newKey(t)
		manyInstancesRevokeSeenByAll(t, servers, db, acct, id, cred, cliArgs)
	})

	t.Run("a rate-limit change through the CLI is seen by every instance", func(t *testing.T) {
		id, cred := newKey(t, "--rate-limit", "1000")
		manyInstancesLimitSeenByAll(t, servers, db, id, cred, cliArgs)
	})

	t.Run("racing creates across instances make one agent", func(t *testing.T) {
		_, cred := newKey(t, "--rate-limit", "1000")
		codes, ids := manyInstancesRaceCreates(t, servers, cred)
		manyInstancesCheckOneCreated(t, codes, ids)
		_, body, _ := call(t, "GET", servers[0].base+"/v1/ai-agents", cred, "")
		if n := manyInstancesCountRaced(body); n != 1 {
			t.Fatalf("%d agents named Raced", n)
		}
	})
}

// manyInstancesKey creates a full-access key for multi@example.com with
// the extra args, and returns its id and credential.
func manyInstancesKey(t *testing.T, db, acct string, args ...string) (id, cred string) {
	t.Helper()
	out := mustCLI(t, db, "", append([]string{"key", "create", "--account", acct, "--as", "multi@example.com", "--name", "k", "--preset", "full-access", "--json"}, args...)...)
	var k struct{ ID, Credential string }
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		t.Fatal(err)
	}
	return k.ID, k.Credential
}

// manyInstancesExactlyN sends 60 reads of /v1/me, round robin over the
// servers, with a key limited to n: exactly n are admitted, the rest are
// refused with 429, Retry-After and rate_limit_exceeded.
func manyInstancesExactlyN(t *testing.T, servers []*server, cred string, n int64) {
	t.Helper()
	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			manyInstancesAdmitOne(t, servers[i%3].base, cred, &ok, &limited)
		}()
	}
	wg.Wait()
	if ok.Load() != n || limited.Load() != 60-n {
		t.Fatalf("admitted %d, refused %d; want exactly %d admitted", ok.Load(), limited.Load(), n)
	}
}

// manyInstancesAdmitOne reads /v1/me once and counts the answer as
// admitted or limited.
func manyInstancesAdmitOne(t *testing.T, base, cred string, ok, limited *atomic.Int64) {
	code, body, hdr := call(t, "GET", base+"/v1/me", cred, "")
	switch code {
	case 200:
		ok.Add(1)
	case 429:
		limited.Add(1)
		if hdr.Get("Retry-After") == "" || body["error"].(map[string]any)["code"] != "rate_limit_exceeded" {
			t.Errorf("429 without Retry-After or code: %v", body)
		}
	default:
		t.Errorf("status %d: %v", code, body)
	}
}

// manyInstancesRevokeSeenByAll: the key works on every server, is
// revoked through the CLI, and then fails on every server.
func manyInstancesRevokeSeenByAll(t *testing.T, servers []*server, db, acct, id, cred string, cliArgs []string) {
	t.Helper()
	for _, s := range servers {
		if code, _, _ := call(t, "GET", s.base+"/v1/me", cred, ""); code != 200 {
			t.Fatalf("before revoke: %d", code)
		}
	}
	args := append([]string{"key", "revoke"}, cliArgs...)
	mustCLI(t, db, "", append(args, "--account", acct, "--as", "multi@example.com", id)...)
	for _, s := range servers {
		if code, _, _ := call(t, "GET", s.base+"/v1/me", cred, ""); code != 401 {
			t.Fatalf("after revoke: %d at %s", code, s.base)
		}
	}
}

// manyInstancesLimitSeenByAll: the key is used once on every server, its
// limit is set to 1 through the CLI, and the very next request on every
// server is refused for it (429).
func manyInstancesLimitSeenByAll(t *testing.T, servers []*server, db, id, cred string, cliArgs []string) {
	t.Helper()
	for _, s := range servers {
		if code, _, _ := call(t, "GET", s.base+"/v1/me", cred, ""); code != 200 {
			t.Fatalf("before the change: %d", code)
		}
	}
	args := append([]string{"key", "set-rate-limit"}, cliArgs...)
	mustCLI(t, db, "", append(args, id, "1")...)
	for _, s := range servers {
		if code, _, _ := call(t, "GET", s.base+"/v1/me", cred, ""); code != 429 {
			t.Fatalf("after the limit change: %d at %s, want 429", code, s.base)
		}
	}
}

// manyInstancesRaceCreates creates an agent named Raced 30 times at once,
// round robin over the servers: the statuses, and the id each answer
// names (created, or existing on 409).
func manyInstancesRaceCreates(t *testing.T, servers []*server, cred string) (codes []int, ids []string) {
	t.Helper()
	var wg sync.WaitGroup
	codes = make([]int, 30)
	ids = make([]string, 30)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], ids[i] = manyInstancesCreateRaced(t, servers[i%3].base, cred)
		}()
	}
	wg.Wait()
	return codes, ids
}

func manyInstancesCreateRaced(t *testing.T, base, cred string) (code int, id string) {
	code, body, _ := call(t, "POST", base+"/v1/ai-agents", cred, `{"name":"Raced"}`)
	if code == 201 {
		id = body["data"].(map[string]any)["id"].(string)
	} else if code == 409 {
		id = body["error"].(map[string]any)["existing_id"].(string)
	}
	return code, id
}

// manyInstancesCheckOneCreated: one create answered 201, every other 409,
// and all name the same agent.
func manyInstancesCheckOneCreated(t *testing.T, codes []int, ids []string) {
	t.Helper()
	created := 0
	for i, c := range codes {
		if c == 201 {
			created++
		} else if c != 409 {
			t.Fatalf("status %d", c)
		}
		if ids[i] != ids[0] {
			t.Fatalf("ids differ: %v", ids)
		}
	}
	if created != 1 {
		t.Fatalf("%d creates succeeded, want 1", created)
	}
}

// manyInstancesCountRaced counts the agents named Raced in a list.
func manyInstancesCountRaced(body map[string]any) int {
	n := 0
	for _, it := range body["data"].([]any) {
		if strings.EqualFold(it.(map[string]any)["name"].(string), "Raced") {
			n++
		}
	}
	return n
}
