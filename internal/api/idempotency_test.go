package api

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/llm/llmtest"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

func withKey(k string) []string { return []string{"Idempotency-Key: " + k} }

func TestIdempotencyKeyOnCreate(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newFixture(t, engine)
		key := f.key(allAgentScopes...)
		post := func(idem, body string) *response {
			return f.do(req{method: "POST", path: "/v1/ai-agents", key: key, body: body, headers: withKey(idem)})
		}
		for _, bad := range []string{"", strings.Repeat("k", 256), "caf\u00e9", "a\x7fb"} {
			post(bad, `{"name":"x"}`).wantError(t, 400, domain.CodeInvalidValue, "Idempotency-Key:invalid_value")
		}
		f.do(req{method: "POST", path: "/v1/ai-agents", key: key, body: `{"name":"x"}`,
			headers: []string{"Idempotency-Key: a", "Idempotency-Key: +b"}}).wantError(t, 400, domain.CodeInvalidValue, "Idempotency-Key:invalid_value")

		first := post("k1", `{"name":"Helpdesk"}`)
		first.wantStatus(t, 201)
		again := post("k1", `{"name":"Helpdesk"}`)
		again.wantStatus(t, 201)
		if again.Body.String() != first.Body.String() || again.Header().Get("Location") != first.Header().Get("Location") ||
			again.Header().Get("Idempotent-Replayed") != "true" || first.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("replay %d %q %v, first %q %v", again.Code, again.Body, again.Header(), first.Body, first.Header())
		}
		// Fresh rate-limit headers: the replay counted.
		r1, _ := strconv.Atoi(first.Header().Get("X-RateLimit-Remaining"))
		r2, _ := strconv.Atoi(again.Header().Get("X-RateLimit-Remaining"))
		if r2 != r1-1 {
			t.Fatalf("remaining %d then %d", r1, r2)
		}
		post("k1", `{"name":"Helpdesk2"}`).wantError(t, 400, domain.CodeInvalidValue, "Idempotency-Key:invalid_value")
		f.do(req{method: "POST", path: "/v1/ai-agents/" + first.data()["id"].(string) + "/questions", key: key,
			body: `{"name":"Helpdesk"}`, headers: withKey("k1")}).wantError(t, 400, domain.CodeInvalidValue, "Idempotency-Key:invalid_value")
		// Keys are per account.
		other, owner := f.newAccount("Other")
		otherKey := f.keyIn(other, owner, nil, allAgentScopes...).Credential
		f.do(req{method: "POST", path: "/v1/ai-agents", key: otherKey, body: `{"name":"Helpdesk"}`, headers: withKey("k1")}).wantStatus(t, 201)

		// A validation 400 is not saved: the key runs again.
		post("k2", `{}`).wantError(t, 400, domain.CodeMissingField, "name:missing_field")
		if r := post("k2", `{}`); r.Header().Get("Idempotent-Replayed") != "" {
			t.Fatal("a 400 was replayed")
		}
		post("k2", `{"name":"Second"}`).wantStatus(t, 201)
		// A 409 is saved and replayed.
		post("k3", `{"name":"Second"}`).wantError(t, 409, domain.CodeDuplicateValue, "name:duplicate_value")
		if r := post("k3", `{"name":"Second"}`); r.Code != 409 || r.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("409 replay: %d %v", r.Code, r.Header())
		}
		// Without a key, nothing changes: a second create is a duplicate.
		f.send("POST", "/v1/ai-agents", key, `{"name":"Helpdesk"}`).wantError(t, 409, domain.CodeDuplicateValue, "name:duplicate_value")
		if n := len(f.get("/v1/ai-agents", key).body["data"].([]any)); n != 2 {
			t.Fatalf("%d agents, want 2", n)
		}
	})
}

// TestIdempotencyAcrossInstances asks one question with one key through
// two servers on one database at once: the model is asked once, every
// answer is that question's (201, replayed or not) or 409 in progress, and
// once the first is done every retry is the replay.
func TestIdempotencyAcrossInstances(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		dsn := filepath.Join(t.TempDir(), "agentapi.db")
		if engine == store.EnginePostgres {
			dsn = storetest.PostgresURL(t)
		}
		// Two stores on one database: two instances.
		st1, st2 := openStore(t, dsn), openStore(t, dsn)
		release := make(chan struct{})
		opt, peer := withModel(t, func(llmtest.Request) (int, string) {
			<-release
			return 200, llmtest.Answer("forty-two")
		})
		f1 := newFixtureOn(t, st1, opt)
		f2 := newFixtureOn(t, st2, opt)
		ctx := context.Background()
		if err := f1.st.SetAccountFeature(ctx, f1.account.ID, domain.FeatureAIAnswers, true); err != nil {
			t.Fatal(err)
		}
		key := f1.key(allAgentScopes...)
		id := f1.createAgent(key, "Oracle")
		ask := func(f *fixture) *response {
			return f.do(req{method: "POST", path: "/v1/ai-agents/" + id + "/questions", key: key,
				body: `{"question":"The answer?"}`, headers: withKey("q-1")})
		}
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			codes = map[int]int{}
		)
		for i := range 8 {
			wg.Go(func() {
				r := ask([]*fixture{f1, f2}[i%2])
				mu.Lock()
				codes[r.Code]++
				mu.Unlock()
			})
		}
		// Let the losers be refused while the winner waits on the model.
		deadline := time.Now().Add(30 * time.Second)
		for len(peer.Requests()) == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		close(release)
		wg.Wait()
		if codes[201] < 1 || codes[201]+codes[409] != 8 {
			t.Fatalf("status counts %v", codes)
		}
		for _, f := range []*fixture{f1, f2} {
			r := ask(f)
			if r.Code != 201 || r.Header().Get("Idempotent-Replayed") != "true" || r.data()["answer"] != "forty-two" {
				t.Fatalf("retry: %d %v %s", r.Code, r.Header(), r.Body)
			}
		}
		if n := len(peer.Requests()); n != 1 {
			t.Fatalf("the model was asked %d times", n)
		}
	})
}

func openStore(t *testing.T, dsn string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
