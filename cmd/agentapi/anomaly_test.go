package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/store"
)

// The built binary raises api_key.anomaly after_idle for a key last used
// 31 days ago in the store and used again: once, however often it is used
// then, with the old last use in its details (docs/webhooks.md, Key
// anomalies). Nothing but the request and serve's own background writes.
func TestServeAfterIdleAnomaly(t *testing.T) {
	db := filepath.Join(t.TempDir(), "idle.db")
	acct := mustCLI(t, db, "", "account", "create", "--name", "Idle")
	mustCLI(t, db, "long enough password\n", "user", "create", "--account", acct, "--email", "u@example.com", "--role", "owner")
	out := mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "u@example.com", "--name", "k",
		"--preset", "full-access", "--json")
	var k struct{ ID, Credential string }
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		t.Fatal(err)
	}
	lastUsed := time.Now().Add(-31 * 24 * time.Hour).UTC().Truncate(time.Millisecond)
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	err = st.TouchKeys(ctx, map[string]time.Time{k.ID: lastUsed})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}

	s := startServer(t, nil, "--db", db)
	if code, body, _ := call(t, "GET", s.base+"/v1/me", k.Credential, ""); code != 200 {
		t.Fatalf("GET /v1/me: %d %v", code, body)
	}
	evs := anomalyEvents(t, s.base, k.Credential, 1)
	ev := evs[0]
	details, _ := ev["details"].(map[string]any)
	if ev["reason"] != "after_idle" || details["last_used_at"] != lastUsed.Format("2006-01-02T15:04:05.000Z") || details["idle_days"] != 31.0 {
		t.Errorf("anomaly %v", ev)
	}
	if data, _ := ev["data"].(map[string]any); data["id"] != k.ID {
		t.Errorf("anomaly about %v, want %s", ev["data"], k.ID)
	}
	// Used again: the write-behind runs each second; two more pass with
	// no second event.
	for range 3 {
		call(t, "GET", s.base+"/v1/me", k.Credential, "")
		time.Sleep(time.Second)
	}
	if evs := anomalyEvents(t, s.base, k.Credential, 1); len(evs) != 1 {
		t.Errorf("%d anomalies after more uses, want 1", len(evs))
	}
}

// anomalyEvents polls GET /v1/events for api_key.anomaly until at least
// want are listed (for up to 10 s) and returns them.
func anomalyEvents(t *testing.T, base, cred string, want int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body, _ := call(t, "GET", base+"/v1/events?type=api_key.anomaly", cred, "")
		if code != 200 {
			t.Fatalf("GET /v1/events: %d %v", code, body)
		}
		list, _ := body["data"].([]any)
		if len(list) >= want || time.Now().After(deadline) {
			out := make([]map[string]any, len(list))
			for i, v := range list {
				out[i], _ = v.(map[string]any)
			}
			if len(out) < want {
				t.Fatalf("%d anomaly events after 10 s, want %d", len(out), want)
			}
			return out
		}
		time.Sleep(200 * time.Millisecond)
	}
}
