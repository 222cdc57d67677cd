package api

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/llm/llmtest"
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
}
