package api

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/llm/llmtest"
	"github.com/agentapi/agentapi/internal/metrics"
)

// TestClientWentAway: a client that goes away mid-request, or mid-stream,
// is logged at INFO ("client went away"), never at ERROR, and its request
// is still logged with its outcome.
func TestClientWentAway(t *testing.T) {
	asked := make(chan struct{}, 2)
	opt, _ := withModel(t, func(req llmtest.Request) (int, string) {
		asked <- struct{}{}
		<-req.Context.Done()
		return llmtest.Echo(req)
	})
	f := newFixture(t, "sqlite", opt)
	if err := f.st.SetAccountFeature(context.Background(), f.account.ID, domain.FeatureAIAnswers, true); err != nil {
		t.Fatal(err)
	}
	key := f.key(allAgentScopes...)
	path := "/v1/ai-agents/" + f.createAgent(key, "A") + "/questions"
	for _, body := range []string{`{"question":"hi"}`, `{"question":"hi","stream":true}`} {
		ctx, cancel := context.WithCancel(context.Background())
		r := httptest.NewRequestWithContext(ctx, "POST", path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+key)
		r.Header.Set("Content-Type", "application/json")
		done := make(chan struct{})
		go func() {
			defer close(done)
			f.bare.ServeHTTP(httptest.NewRecorder(), r)
		}()
		select {
		case <-asked:
		case <-time.After(10 * time.Second):
			t.Fatal("the model was not asked")
		}
		cancel()
		<-done
	}
	logs := f.logs.String()
	if strings.Count(logs, `"msg":"client went away"`) != 2 || strings.Contains(logs, `"level":"ERROR"`) {
		t.Fatalf("want two INFO lines saying the client went away and no ERROR:\n%s", logs)
	}
	if strings.Count(logs, `"route":"POST /v1/ai-agents/{agent_id}/questions"`) != 2 {
		t.Fatalf("the requests were not logged with their outcome:\n%s", logs)
	}
	// The answer not yet begun is recorded as 499, the stream begun as 200.
	if !strings.Contains(logs, `"status":499`) || strings.Contains(logs, `"status":500`) {
		t.Fatalf("want the question whose client went away logged as 499, not 500:\n%s", logs)
	}
}

// TestClientGoneDuringKeyLookup: a client that hangs up while its key is
// looked up in a store that does not answer is recorded as 499 in the log
// line and in agentapi_http_requests_total, never as 500; a request that
// waits out the service's own bound on the store is still a 500.
func TestClientGoneDuringKeyLookup(t *testing.T) {
	st, proxy := postgresBehindProxy(t)
	m := metrics.New()
	f := newFixtureOn(t, st, func(c *Config) { c.Metrics = m })
	key := f.key(allAgentScopes...)
	f.get("/v1/me", key).wantStatus(t, 200)
	proxy.Stall()
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, "GET", "/v1/me", nil)
	r.Header.Set("Authorization", "Bearer "+key)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.bare.ServeHTTP(httptest.NewRecorder(), r)
	}()
	time.Sleep(300 * time.Millisecond) // within the store's bound (store.AuthReadTimeout)
	cancel()
	<-done
	if got := requestStatuses(f.logs.String()); !slices.Equal(got, []string{"200", "499"}) {
		t.Fatalf("request lines with statuses %v, want [200 499]:\n%s", got, f.logs.String())
	}
	f.get("/v1/me", key).wantStatus(t, 500) // the store's bound, not the client
	if got := requestStatuses(f.logs.String()); !slices.Equal(got, []string{"200", "499", "500"}) {
		t.Fatalf("request lines with statuses %v, want [200 499 500]", got)
	}
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	for _, status := range []string{"499", "500"} {
		if want := `agentapi_http_requests_total{method="GET",route="/v1 (refused before routing)",status="` + status + `"} 1`; !strings.Contains(w.Body.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, w.Body.String())
		}
	}
}

// requestStatuses is the status of each request line in logs, in order.
func requestStatuses(logs string) []string {
	var out []string
	for line := range strings.Lines(logs) {
		if _, rest, ok := strings.Cut(line, `"msg":"request"`); ok {
			_, st, _ := strings.Cut(rest, `"status":`)
			out = append(out, st[:3])
		}
	}
	return out
}
