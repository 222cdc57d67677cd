package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/client"
	"github.com/agentapi/agentapi/internal/domain"
)

// Every events and webhook endpoint method against the real server.
func TestWebhookMethodsAgainstTheServer(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := f.client(f.key(nil, append(allScopes, domain.ScopeWebhooksManage)...).Credential)

	e := webhookCreate(t, ctx, f, c)
	webhookUpdate(t, ctx, f, c, e)
	webhookEvents(t, ctx, c, e)
	webhookRotate(t, ctx, f, c, e)
	if err := c.DeleteWebhookEndpoint(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	_, err := c.GetWebhookEndpoint(ctx, e.ID)
	wantAPIError(t, err, 404, client.CodeNotFound)
	if err := c.DeleteWebhookEndpoint(ctx, ""); err == nil {
		t.Fatal("an empty id was sent")
	}
}

// webhookCreate creates an endpoint, whose answer alone shows the secret,
// and lists and reads it back.
func webhookCreate(t *testing.T, ctx context.Context, f *fixture, c tclient) client.WebhookEndpoint {
	t.Helper()
	e, err := c.CreateWebhookEndpoint(ctx, client.NewWebhookEndpoint{URL: "https://hooks.example.com/in",
		EnabledEvents: []string{"ai_agent.*"}, Description: "listener"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(e.ID, "we_") || e.URL != "https://hooks.example.com/in" || e.Description != "listener" ||
		strings.Join(e.EnabledEvents, ",") != "ai_agent.*" || e.Status != "enabled" || e.DisabledReason != nil ||
		!strings.HasPrefix(e.Secret, "whsec_") || !e.CreatedAt.Equal(f.clock.Now()) || e.OldSecretExpiresAt != nil {
		t.Fatalf("CreateWebhookEndpoint: %+v", e)
	}
	got, err := c.GetWebhookEndpoint(ctx, e.ID)
	if err != nil || got.Secret != "" || got.ID != e.ID || !got.UpdatedAt.Equal(e.UpdatedAt) {
		t.Fatalf("GetWebhookEndpoint: %+v, %v", got, err)
	}
	page, err := c.ListWebhookEndpoints(ctx, 0, "")
	if err != nil || len(page.Items) != 1 || page.Items[0].ID != e.ID || page.HasMore || page.Limit != 30 {
		t.Fatalf("ListWebhookEndpoints: %+v, %v", page, err)
	}
	return e
}

// webhookUpdate disables the endpoint (no test event then), and enables
// it again.
func webhookUpdate(t *testing.T, ctx context.Context, f *fixture, c tclient, e client.WebhookEndpoint) {
	t.Helper()
	f.clock.Advance(time.Second)
	off := "disabled"
	up, err := c.UpdateWebhookEndpoint(ctx, e.ID, client.WebhookEndpointUpdate{Status: &off})
	if err != nil || up.Status != "disabled" || up.DisabledReason == nil || *up.DisabledReason != "manual" || !up.UpdatedAt.Equal(f.clock.Now()) {
		t.Fatalf("UpdateWebhookEndpoint: %+v, %v", up, err)
	}
	_, err = c.SendTestEvent(ctx, e.ID)
	wantAPIError(t, err, 409, client.CodeImmutableState)
	on, events := "enabled", []string{"*"}
	up, err = c.UpdateWebhookEndpoint(ctx, e.ID, client.WebhookEndpointUpdate{Status: &on, EnabledEvents: &events})
	if err != nil || up.Status != "enabled" || up.DisabledReason != nil || strings.Join(up.EnabledEvents, ",") != "*" {
		t.Fatalf("UpdateWebhookEndpoint: %+v, %v", up, err)
	}
}

// webhookEvents creates three agents, reads their events page by page and
// one by one, sends a test event, and resends an event.
func webhookEvents(t *testing.T, ctx context.Context, c tclient, e client.WebhookEndpoint) {
	t.Helper()
	var ids []string
	for _, name := range []string{"One", "Two", "Three"} {
		a, err := c.CreateAgent(ctx, client.NewAgent{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	got := agentEvents(t, ctx, c, ids)
	one, err := c.GetEvent(ctx, got[1].ID)
	if err != nil || one.ID != got[1].ID || string(one.Data) != string(got[1].Data) {
		t.Fatalf("GetEvent: %+v, %v", one, err)
	}
	none, err := c.ListEvents(ctx, client.EventListParams{Types: []string{"api_key.*"}, CreatedSince: got[0].CreatedAt})
	if err != nil || len(none.Items) != 0 || none.HasMore {
		t.Fatalf("ListEvents of api_key.*: %+v, %v", none, err)
	}
	test, err := c.SendTestEvent(ctx, e.ID)
	if err != nil || test.Type != "webhook.test" || !strings.HasPrefix(test.ID, "evt_") {
		t.Fatalf("SendTestEvent: %+v, %v", test, err)
	}
	if err := c.ResendDelivery(ctx, e.ID, got[0].ID); err != nil {
		t.Fatal(err)
	}
	err = c.ResendDelivery(ctx, e.ID, "evt_nowhere")
	wantAPIError(t, err, 404, client.CodeNotFound)
	log, err := c.ListDeliveries(ctx, e.ID, client.DeliveryListParams{Status: "failed", EventID: got[0].ID, Limit: 5})
	if err != nil || len(log.Items) != 0 || log.Limit != 5 {
		t.Fatalf("ListDeliveries (no worker runs, so no attempt): %+v, %v", log, err)
	}
}

// agentEvents reads the ai_agent.created events two a page: one for each
// of ids, in order.
func agentEvents(t *testing.T, ctx context.Context, c tclient, ids []string) []client.Event {
	t.Helper()
	var got []client.Event
	for ev, err := range c.Events(ctx, client.EventListParams{Types: []string{"ai_agent.created"}, Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	if len(got) != len(ids) {
		t.Fatalf("Events: %d events, want %d: %+v", len(got), len(ids), got)
	}
	for i, ev := range got {
		a, err := ev.AgentData()
		if err != nil || a.ID != ids[i] || ev.Type != "ai_agent.created" || ev.RequestID == nil || ev.Actor != nil {
			t.Fatalf("event %d: %+v, %+v, %v", i, ev, a, err)
		}
		if _, err := ev.KeyData(); err == nil {
			t.Fatal("KeyData read an agent event")
		}
	}
	return got
}

// webhookRotate rotates the secret with an hour's overlap.
func webhookRotate(t *testing.T, ctx context.Context, f *fixture, c tclient, e client.WebhookEndpoint) {
	t.Helper()
	r, err := c.RotateWebhookSecret(ctx, e.ID, time.Hour)
	if err != nil || !strings.HasPrefix(r.Secret, "whsec_") || r.Secret == e.Secret || r.OldSecretExpiresAt == nil ||
		!r.OldSecretExpiresAt.Equal(f.clock.Now().Add(time.Hour)) {
		t.Fatalf("RotateWebhookSecret: %+v, %v", r, err)
	}
}

// Rotating a secret, sending a test event and resending run at most once
// after a 5xx or a dropped connection (the server has no Idempotency-Key
// for them), but are retried after a 429, which ran nothing.
func TestWebhookActionsAreNotRetried(t *testing.T) {
	ctx := context.Background()
	actions := map[string]func(c tclient) error{
		"rotate": func(c tclient) error { _, err := c.RotateWebhookSecret(ctx, "we_1", -1); return err },
		"test":   func(c tclient) error { _, err := c.SendTestEvent(ctx, "we_1"); return err },
		"resend": func(c tclient) error { return c.ResendDelivery(ctx, "we_1", "evt_1") },
	}
	for name, act := range actions {
		for _, first := range []step{serverError("req_1"), {drop: true}} {
			fs := newFaultServer(t, first, step{status: 202, body: `{"data":{}}`})
			if err := act(faultClient(t, fs, testKey(t))); err == nil {
				t.Fatalf("%s: no error", name)
			}
			if n := len(fs.requests()); n != 1 {
				t.Fatalf("%s retried after %+v: %d requests", name, first, n)
			}
		}
		limited := step{status: 429, header: map[string]string{"Retry-After": "1"}, body: `{"error":{"code":"rate_limit_exceeded","message":"slow down"}}`}
		fs := newFaultServer(t, limited, step{status: 400, body: `{"error":{"code":"invalid_value","message":"no"}}`})
		act(faultClient(t, fs, testKey(t)))
		if n := len(fs.requests()); n != 2 {
			t.Fatalf("%s after a 429: %d requests, want 2", name, n)
		}
	}
}
