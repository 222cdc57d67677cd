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
	db := storetest.PostgresURL(t)
	redisURL := testenv.RedisURL(t)
	// A fresh Redis namespace: the limiter keys by key id, which is unique
	// per test run anyway; flushing is not needed.
	var servers []*server
	for range 3 {
		servers = append(servers, startServer(t, nil, "--db", db, "--redis", redisURL))
	}
	acct := mustCLI(t, db, "", "account", "create", "--name", "Multi")
	mustCLI(t, db, "long enough password\n", "user", "create", "--account", acct, "--email", "multi@example.com", "--role", "owner")
	newKey := func(args ...string) (id, cred string) {
		t.Helper()
		out := mustCLI(t, db, "", append([]string{"key", "create", "--account", acct, "--as", "multi@example.com", "--name", "k", "--preset", "full-access", "--json"}, args...)...)
		var k struct{ ID, Credential string }
		if err := json.Unmarshal([]byte(out), &k); err != nil {
			t.Fatal(err)
		}
		return k.ID, k.Credential
	}

	t.Run("exactly N admitted across instances", func(t *testing.T) {
		const n = 20
		_, cred := newKey("--rate-limit", fmt.Sprint(n))
		var ok, limited atomic.Int64
		var wg sync.WaitGroup
		for i := range 60 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, body, hdr := call(t, "GET", servers[i%3].base+"/v1/me", cred, "")
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
			}()
		}
		wg.Wait()
		if ok.Load() != n || limited.Load() != 60-n {
			t.Fatalf("admitted %d, refused %d; want exactly %d admitted", ok.Load(), limited.Load(), n)
		}
	})

	t.Run("revocation through one instance is seen by the others", func(t *testing.T) {
		id, cred := newKey()
		for _, s := range servers {
			if code, _, _ := call(t, "GET", s.base+"/v1/me", cred, ""); code != 200 {
				t.Fatalf("before revoke: %d", code)
			}
		}
		// With --redis, as production runs it (docs/production.md): the
		// command raises the key epoch's mirror the instances check.
		mustCLI(t, db, "", "key", "revoke", "--redis", redisURL, "--account", acct, "--as", "multi@example.com", id)
		for _, s := range servers {
			if code, _, _ := call(t, "GET", s.base+"/v1/me", cred, ""); code != 401 {
				t.Fatalf("after revoke: %d at %s", code, s.base)
			}
		}
	})

	t.Run("racing creates across instances make one agent", func(t *testing.T) {
		_, cred := newKey("--rate-limit", "1000")
		var wg sync.WaitGroup
		codes := make([]int, 30)
		ids := make([]string, 30)
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, body, _ := call(t, "POST", servers[i%3].base+"/v1/ai-agents", cred, `{"name":"Raced"}`)
				codes[i] = code
				if code == 201 {
					ids[i] = body["data"].(map[string]any)["id"].(string)
				} else if code == 409 {
					ids[i] = body["error"].(map[string]any)["existing_id"].(string)
				}
			}()
		}
		wg.Wait()
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
		_, body, _ := call(t, "GET", servers[0].base+"/v1/ai-agents", cred, "")
		n := 0
		for _, it := range body["data"].([]any) {
			if strings.EqualFold(it.(map[string]any)["name"].(string), "Raced") {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d agents named Raced", n)
		}
	})
}
