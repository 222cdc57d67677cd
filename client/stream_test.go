package client_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/client"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/llm/llmtest"
)

func TestAskStream(t *testing.T) {
	f := newFixture(t, withModel(t, llmtest.Echo))
	ctx := context.Background()
	if err := f.st.SetAccountFeature(ctx, f.account.ID, domain.FeatureAIAnswers, true); err != nil {
		t.Fatal(err)
	}
	c := f.client(f.key(nil, allScopes...).Credential)
	a, err := c.CreateAgent(ctx, client.NewAgent{Name: "Streamer"})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var final *client.Answer
	for ev, err := range c.AskStream(ctx, a.ID, client.Question{Question: "What is 2+2?"}) {
		if err != nil {
			t.Fatal(err)
		}
		if final != nil {
			t.Fatal("an event after the answer")
		}
		text.WriteString(ev.Delta)
		final = ev.Answer
	}
	if text.String() != "echo: What is 2+2?" || final == nil || final.Answer != text.String() || !strings.HasPrefix(final.ID, "qst_") {
		t.Fatalf("deltas %q, answer %+v", text.String(), final)
	}
	// A refusal before the stream is the usual *Error.
	for _, err := range c.AskStream(ctx, "agt_none", client.Question{Question: "x"}) {
		wantAPIError(t, err, 404, client.CodeNotFound)
	}
}

func TestAskStreamModelFailure(t *testing.T) {
	f := newFixture(t, withModel(t, func(llmtest.Request) (int, string) { return 503, `{}` }))
	ctx := context.Background()
	if err := f.st.SetAccountFeature(ctx, f.account.ID, domain.FeatureAIAnswers, true); err != nil {
		t.Fatal(err)
	}
	c := f.client(f.key(nil, allScopes...).Credential)
	a, err := c.CreateAgent(ctx, client.NewAgent{Name: "Streamer"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range c.AskStream(ctx, a.ID, client.Question{Question: "x"}) {
		n++
		wantAPIError(t, err, 500, client.CodeServerError)
	}
	if n != 1 {
		t.Fatalf("%d events", n)
	}
}
