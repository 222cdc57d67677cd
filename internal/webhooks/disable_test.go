package webhooks_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/agentapi/agentapi/client/webhook"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

// TestGoneDisablesTheEndpoint: a 410 disables the endpoint at once
// (gone), audited, and a webhook_endpoint.disabled event goes to the
// account's other endpoint and not to the gone one.
func TestGoneDisablesTheEndpoint(t *testing.T) {
	g := newRig(t, store.EngineSQLite)
	gone, other := newReceiver(t), newReceiver(t)
	gone.answerWith(status(http.StatusGone))
	cg := g.endpoint(gone)
	g.endpoint(other, string(domain.EventWebhookEndpointDisabled))
	g.run()
	g.agent("Scout")
	gone.next(t, 5*time.Second)
	got := other.next(t, 5*time.Second)
	var body struct {
		Type string `json:"type"`
		Data struct {
			ID             string `json:"id"`
			DisabledReason string `json:"disabled_reason"`
		} `json:"data"`
	}
	if err := json.Unmarshal(got.body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Type != string(domain.EventWebhookEndpointDisabled) || body.Data.ID != cg.Endpoint.ID || body.Data.DisabledReason != domain.DisabledGone {
		t.Fatalf("the other endpoint was sent %s", got.body)
	}
	if e := g.getEndpoint(cg.Endpoint.ID); e.Status != domain.WebhookDisabled || e.DisabledReason != domain.DisabledGone {
		t.Fatalf("gone endpoint: %s %q", e.Status, e.DisabledReason)
	}
	if a := g.attempts(cg.Endpoint.ID); len(a) != 1 || a[0].DeliveryStatus != domain.DeliveryFailed {
		t.Fatalf("gone endpoint's attempts: %+v", a)
	}
	gone.nothing(t, 300*time.Millisecond)
	checkAudited(t, g, cg.Endpoint.ID)
}

func checkAudited(t *testing.T, g *rig, endpointID string) {
	t.Helper()
	evs, err := g.st.ListAuditEvents(context.Background(), g.actor.AccountID, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Action == domain.AuditWebhookDisabled && len(e.Detail) >= len(endpointID) && e.Detail[:len(endpointID)] == endpointID {
			return
		}
	}
	t.Fatalf("no %s audit entry for %s", domain.AuditWebhookDisabled, endpointID)
}

// TestFailedAfterEightAttempts: a delivery answered 500 every time is
// failed after its 8th attempt; resending makes it pending again; an
// endpoint with no 2xx for 5 days is disabled (failing).
func TestFailedAfterEightAttempts(t *testing.T) {
	g := newRig(t, store.EngineSQLite)
	r := newReceiver(t)
	r.answerWith(status(http.StatusInternalServerError))
	c := g.endpoint(r)
	g.run()
	ev := g.agent("Scout")
	for n := 1; n <= 8; n++ {
		r.next(t, 5*time.Second)
		a := g.waitAttempts(c.Endpoint.ID, n)
		if a.Attempt != n {
			t.Fatalf("attempt %d recorded as %d", n, a.Attempt)
		}
		want := domain.DeliveryPending
		if n == 8 {
			want = domain.DeliveryFailed
		}
		if a.DeliveryStatus != want {
			t.Fatalf("after attempt %d: delivery %s, want %s", n, a.DeliveryStatus, want)
		}
		g.clock.Advance(11 * time.Hour) // past every wait of the schedule
	}
	r.nothing(t, 300*time.Millisecond)
	if e := g.getEndpoint(c.Endpoint.ID); e.Status != domain.WebhookEnabled {
		t.Fatalf("endpoint %s after 3 days and 5 hours failing", e.Status)
	}

	if err := g.svc.Resend(context.Background(), g.actor, c.Endpoint.ID, ev.ID); err != nil {
		t.Fatal(err)
	}
	if got := r.next(t, 5*time.Second); got.header.Get(webhook.HeaderID) != ev.ID {
		t.Fatalf("resent delivery's webhook-id %q", got.header.Get(webhook.HeaderID))
	}
	if a := g.waitAttempts(c.Endpoint.ID, 9); a.Attempt != 1 || a.DeliveryStatus != domain.DeliveryPending {
		t.Fatalf("resent: %+v", a)
	}

	g.clock.Advance(2 * 24 * time.Hour) // 5 days since the first failure
	r.next(t, 5*time.Second)
	g.waitAttempts(c.Endpoint.ID, 10)
	if e := g.getEndpoint(c.Endpoint.ID); e.Status != domain.WebhookDisabled || e.DisabledReason != domain.DisabledFailing {
		t.Fatalf("after 5 days failing: %s %q", e.Status, e.DisabledReason)
	}
	checkAudited(t, g, c.Endpoint.ID)
}

// TestRedirectIsAFailure: a 3xx is a failed attempt, and its Location is
// not followed.
func TestRedirectIsAFailure(t *testing.T) {
	g := newRig(t, store.EngineSQLite)
	r, target := newReceiver(t), newReceiver(t)
	r.answerWith(func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, target.srv.URL, http.StatusFound)
	})
	c := g.endpoint(r)
	g.run()
	g.agent("Scout")
	r.next(t, 5*time.Second)
	a := g.waitAttempts(c.Endpoint.ID, 1)
	if a.Status != "failed" || a.ResponseStatus != http.StatusFound || a.DeliveryStatus != domain.DeliveryPending {
		t.Fatalf("after a 302: %+v", a)
	}
	target.nothing(t, 300*time.Millisecond)
}
