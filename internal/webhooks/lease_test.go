package webhooks_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/egress"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// TestLeaseOfADeadInstance, on both engines: a delivery claimed by an
// instance that then dies is claimed by no one until its 30 s lease runs
// out, and then is; the dead instance's late result (its token) is not
// recorded over the new one's.
func TestLeaseOfADeadInstance(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		g := newRig(t, engine)
		r := newReceiver(t)
		c := g.endpoint(r)
		ev := g.agent("Scout")
		now := time.Now()
		dead, err := g.st.ClaimDeliveries(ctx, c.Endpoint.ID, "lease_dead", now, now.Add(30*time.Second), 10)
		if err != nil || len(dead) != 1 || dead[0].Event.ID != ev.ID {
			t.Fatalf("claim: %+v, %v", dead, err)
		}
		again, err := g.st.ClaimDeliveries(ctx, c.Endpoint.ID, "lease_early", now.Add(29*time.Second), now.Add(59*time.Second), 10)
		if err != nil || len(again) != 0 {
			t.Fatalf("claimed again within the lease: %+v, %v", again, err)
		}

		g.run()
		r.nothing(t, 500*time.Millisecond) // the worker waits for the lease too
		g.clock.Advance(31 * time.Second)
		r.next(t, 5*time.Second)
		a := g.waitAttempts(c.Endpoint.ID, 1)
		if a.Attempt != 1 || a.DeliveryStatus != domain.DeliveryDelivered {
			t.Fatalf("after the lease ran out: %+v", a)
		}

		stale := store.Outcome{Token: "lease_dead", FailingFor: time.Hour, Attempt: domain.WebhookAttempt{ID: domain.NewID("wha", now),
			EndpointID: c.Endpoint.ID, EventID: ev.ID, Attempt: 1, Status: "failed", ResponseStatus: 500, CreatedAt: now}}
		next := now.Add(time.Minute)
		stale.Next = &next
		if _, err := g.st.RecordAttempt(ctx, stale, noDisabledEvent(t)); err != nil {
			t.Fatal(err)
		}
		if as := g.attempts(c.Endpoint.ID); len(as) != 1 || as[0].DeliveryStatus != domain.DeliveryDelivered {
			t.Fatalf("the dead instance's result was recorded: %+v", as)
		}
	})
}

// TestHangingEndpointDelaysNoOther: with two attempts per endpoint, twenty
// deliveries to an endpoint that never answers leave room for another
// endpoint's delivery, which arrives at once.
func TestHangingEndpointDelaysNoOther(t *testing.T) {
	g := newRig(t, store.EngineSQLite)
	g.cfg.Slots, g.cfg.PerEndpoint = 4, 2
	hang, healthy := newReceiver(t), newReceiver(t)
	g.post = egress.New(egress.Config{Allow: loopback, Timeout: 10 * time.Second})
	release := make(chan struct{})
	hang.answerWith(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-release:
		case <-req.Context().Done():
		}
	})
	g.endpoint(hang, string(domain.EventAgentCreated))
	g.endpoint(healthy, string(domain.EventAgentDisabled))
	g.run()
	t.Cleanup(func() { close(release) }) // before the worker stops and the receivers close
	var agents []domain.Agent
	for i := range 20 {
		agents = append(agents, storetest.Agent(t, g.st, g.actor.AccountID, "agent "+string(rune('a'+i)), time.Now()))
	}
	hang.next(t, 5*time.Second)
	hang.next(t, 5*time.Second)
	start := time.Now()
	if _, err := g.st.UpdateAgent(context.Background(), g.actor.AccountID, agents[0].ID, func(a *domain.Agent) (bool, error) {
		a.Enabled = false
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	healthy.next(t, 2*time.Second)
	t.Logf("the healthy endpoint's delivery arrived %s after its event", time.Since(start))
	hang.nothing(t, 200*time.Millisecond) // no more than two in flight
}

// noDisabledEvent is RecordAttempt's disabledEvent for an attempt that
// must not disable its endpoint.
func noDisabledEvent(t *testing.T) func(domain.WebhookEndpoint) (domain.Event, domain.AuditEvent, error) {
	return func(e domain.WebhookEndpoint) (domain.Event, domain.AuditEvent, error) {
		t.Errorf("endpoint %s disabled by a stale result", e.ID)
		return domain.Event{}, domain.AuditEvent{}, errors.New("not to be disabled")
	}
}
