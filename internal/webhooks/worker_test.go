package webhooks_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/client/webhook"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

// tolerance lets Verify accept a timestamp of the injected clock.
const tolerance = 30 * 24 * time.Hour

// TestDeliveryIsSigned: a delivery is a POST of the event object with
// webhook-id (the event id), webhook-timestamp (the attempt's time) and a
// webhook-signature that verifies with the endpoint's secret; during a
// rotation's overlap it carries two signatures, one per secret.
func TestDeliveryIsSigned(t *testing.T) {
	g := newRig(t, store.EngineSQLite)
	r := newReceiver(t)
	c := g.endpoint(r)
	g.run()
	ev := g.agent("Scout")
	got := r.next(t, 5*time.Second)
	checkHeaders(t, got, ev, g.waitAttempts(c.Endpoint.ID, 1).CreatedAt)
	if err := webhook.Verify(c.Secret, got.header, got.body, tolerance); err != nil {
		t.Fatalf("verify with the endpoint's secret: %v", err)
	}
	var body struct {
		ID   string          `json:"id"`
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(got.body, &body); err != nil || body.ID != ev.ID || body.Type != string(ev.Type) {
		t.Fatalf("body %s: %v", got.body, err)
	}

	rot, err := g.svc.RotateSecret(context.Background(), g.actor, c.Endpoint.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ev = g.agent("Ranger")
	got = r.next(t, 5*time.Second)
	sigs := strings.Fields(got.header.Get(webhook.HeaderSignature))
	if len(sigs) != 2 {
		t.Fatalf("during the overlap: signatures %q, want two", sigs)
	}
	for _, secret := range []string{c.Secret, rot.Secret} {
		matched := 0
		for _, sig := range sigs {
			h := got.header.Clone()
			h.Set(webhook.HeaderSignature, sig)
			if webhook.Verify(secret, h, got.body, tolerance) == nil {
				matched++
			}
		}
		if matched != 1 {
			t.Fatalf("%d of the signatures %q verify with one of the secrets, want 1", matched, sigs)
		}
	}
}

func checkHeaders(t *testing.T, got received, ev domain.Event, at time.Time) {
	t.Helper()
	want := map[string]string{
		webhook.HeaderID:        ev.ID,
		webhook.HeaderTimestamp: strconv.FormatInt(at.Unix(), 10),
		"Content-Type":          "application/json",
		"User-Agent":            "agentapi-webhooks/test",
	}
	for k, v := range want {
		if g := got.header.Get(k); g != v {
			t.Errorf("%s: %q, want %q", k, g, v)
		}
	}
}

// TestDeliveryRetries: a 500 is retried 5 s later (±10 %) as attempt 2,
// made once the clock gets there; a 429's Retry-After of 120 s puts the
// next attempt no sooner.
func TestDeliveryRetries(t *testing.T) {
	g := newRig(t, store.EngineSQLite)
	r := newReceiver(t)
	r.answerWith(status(http.StatusInternalServerError))
	c := g.endpoint(r)
	g.run()
	ev := g.agent("Scout")
	r.next(t, 5*time.Second)
	a := g.waitAttempts(c.Endpoint.ID, 1)
	start := a.CreatedAt
	if a.Attempt != 1 || a.Status != "failed" || a.ResponseStatus != 500 || a.DeliveryStatus != domain.DeliveryPending || a.NextAttemptAt == nil {
		t.Fatalf("after a 500: %+v", a)
	}
	if d := a.NextAttemptAt.Sub(start); d < 4500*time.Millisecond || d > 5500*time.Millisecond {
		t.Fatalf("next attempt %s after the first, want 5 s ± 10 %%", d)
	}
	r.nothing(t, 300*time.Millisecond)

	g.clock.Advance(6 * time.Second)
	got := r.next(t, 5*time.Second)
	if got.header.Get(webhook.HeaderID) != ev.ID {
		t.Fatalf("retry's webhook-id %q, want %q", got.header.Get(webhook.HeaderID), ev.ID)
	}
	if a := g.waitAttempts(c.Endpoint.ID, 2); a.Attempt != 2 || a.ResponseStatus != 500 {
		t.Fatalf("second attempt: %+v", a)
	}
	checkRetryAfter(t, g, r, c.Endpoint.ID)
}

// checkRetryAfter: a first attempt answered 429 with Retry-After: 120 is
// not retried 5 s later but 120 s later.
func checkRetryAfter(t *testing.T, g *rig, r *receiver, endpointID string) {
	t.Helper()
	r.answerWith(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	g.agent("Ranger")
	r.next(t, 5*time.Second)
	a := g.waitAttempts(endpointID, 3)
	if a.Attempt != 1 || a.ResponseStatus != 429 || a.NextAttemptAt == nil || a.NextAttemptAt.Sub(a.CreatedAt) < 120*time.Second {
		t.Fatalf("after a 429 with Retry-After 120: %+v", a)
	}
	g.clock.Advance(60 * time.Second)
	r.nothing(t, 300*time.Millisecond)
	r.answerWith(status(http.StatusNoContent))
	g.clock.Advance(61 * time.Second)
	r.next(t, 5*time.Second)
	if a := g.waitAttempts(endpointID, 4); a.Attempt != 2 || a.DeliveryStatus != domain.DeliveryDelivered {
		t.Fatalf("after the Retry-After: %+v", a)
	}
}
