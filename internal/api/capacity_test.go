package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/llm/llmtest"
)

// TestModelCallsCapped: questions in progress are capped per account
// (429) and on the instance (503), streamed or not, before the model is
// called and before an Idempotency-Key is reserved.
func TestModelCallsCapped(t *testing.T) {
	release := make(chan struct{})
	slow := func(req llmtest.Request) (int, string) {
		select {
		case <-release:
		case <-req.Context.Done():
		}
		return llmtest.Echo(req)
	}
	opt, peer := withModel(t, slow)
	f := newFixture(t, "sqlite", opt, func(c *Config) { c.MaxModelCalls, c.MaxModelCallsPerAccount = 3, 2 })
	other, owner := f.newAccount("Other")
	ask := map[string]string{}
	for _, a := range []domain.Account{f.account, other} {
		if err := f.st.SetAccountFeature(context.Background(), a.ID, domain.FeatureAIAnswers, true); err != nil {
			t.Fatal(err)
		}
	}
	keyA := f.key(allAgentScopes...)
	keyB := f.keyIn(other, owner, nil, allAgentScopes...).Credential
	ask[keyA] = "/v1/ai-agents/" + f.createAgent(keyA, "A") + "/questions"
	ask[keyB] = "/v1/ai-agents/" + f.createAgent(keyB, "B") + "/questions"

	var wg sync.WaitGroup
	start := func(key, body string) {
		wg.Go(func() {
			r := httptest.NewRequest("POST", ask[key], strings.NewReader(body))
			r.Header.Set("Authorization", "Bearer "+key)
			r.Header.Set("Content-Type", "application/json")
			f.bare.ServeHTTP(httptest.NewRecorder(), r) // the OpenAPI checker is not safe for concurrent use
		})
	}
	waitCalls := func(n int) {
		for deadline := time.Now().Add(10 * time.Second); len(peer.Requests()) < n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the model got %d calls, want %d", len(peer.Requests()), n)
			}
		}
	}
	start(keyA, `{"question":"one"}`)
	start(keyA, `{"question":"two","stream":true}`)
	waitCalls(2)
	for _, body := range []string{`{"question":"three"}`, `{"question":"three","stream":true}`} {
		r := f.do(req{method: "POST", path: ask[keyA], key: keyA, body: body, headers: withKey("k"), unchecked: true})
		r.wantError(t, http.StatusTooManyRequests, domain.CodeRateLimitExceeded)
		if !strings.Contains(r.message(), "Too many questions in progress for this account") || r.Header().Get("Retry-After") == "" {
			t.Fatalf("429 %q, Retry-After %q", r.message(), r.Header().Get("Retry-After"))
		}
	}
	start(keyB, `{"question":"four","stream":true}`)
	waitCalls(3)
	r := f.do(req{method: "POST", path: ask[keyB], key: keyB, body: `{"question":"five"}`, headers: withKey("k"), unchecked: true})
	r.wantError(t, http.StatusServiceUnavailable, domain.CodeServerError)
	if r.Header().Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	close(release)
	wg.Wait()
	if n := len(peer.Requests()); n != 3 {
		t.Fatalf("the model got %d calls, want 3", n)
	}
	// The refused questions reserved no key: the same key now runs.
	f.do(req{method: "POST", path: ask[keyA], key: keyA, body: `{"question":"three"}`, headers: withKey("k")}).wantStatus(t, http.StatusCreated)
}
