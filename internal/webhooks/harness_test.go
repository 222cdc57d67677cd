package webhooks_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/egress"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/webhooks"
)

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// clock is the worker's injected time: the real time (which the store's
// writes use) moved forward by what a test advanced it.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// received is one request a receiver was sent.
type received struct {
	header http.Header
	body   []byte
	at     time.Time
}

// receiver is an endpoint on loopback whose answer a test sets.
type receiver struct {
	srv    *httptest.Server
	got    chan received
	mu     sync.Mutex
	answer http.HandlerFunc
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{got: make(chan received, 100)}
	r.answer = func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.got <- received{header: req.Header.Clone(), body: body, at: time.Now()}
		r.mu.Lock()
		answer := r.answer
		r.mu.Unlock()
		answer(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) answerWith(h http.HandlerFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answer = h
}

func status(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}

// next waits up to within for the receiver's next request.
func (r *receiver) next(t *testing.T, within time.Duration) received {
	t.Helper()
	select {
	case got := <-r.got:
		return got
	case <-time.After(within):
		t.Fatalf("no delivery to %s within %s", r.srv.URL, within)
		return received{}
	}
}

// nothing fails if the receiver is sent anything within d.
func (r *receiver) nothing(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case got := <-r.got:
		t.Fatalf("unexpected delivery to %s: %s %s", r.srv.URL, got.header.Get("webhook-id"), got.body)
	case <-time.After(d):
	}
}

// rig is a store, an account, the endpoint service and a worker on an
// injected clock.
type rig struct {
	t     *testing.T
	st    *store.Store
	clock *clock
	svc   *webhooks.Service
	actor webhooks.Actor
	cfg   webhooks.WorkerConfig
	post  webhooks.Poster
}

func newRig(t *testing.T, engine string) *rig {
	t.Helper()
	st := storetest.Open(t, engine)
	acct := storetest.Account(t, st)
	c := &clock{}
	return &rig{t: t, st: st, clock: c, svc: webhooks.New(st, c.Now, loopback),
		actor: webhooks.Actor{AccountID: acct.ID, UserID: "usr_1", Label: "a@example.com"},
		cfg:   webhooks.WorkerConfig{Poll: 20 * time.Millisecond},
		post:  egress.New(egress.Config{Allow: loopback, Timeout: 2 * time.Second, UserAgent: "agentapi-webhooks/test"})}
}

// run starts the worker, stopped when the test ends.
func (g *rig) run() {
	g.t.Helper()
	w := webhooks.NewWorker(g.st, g.post, g.clock.Now, slog.New(slog.DiscardHandler), g.cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	g.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// endpoint creates an endpoint for r subscribing to events.
func (g *rig) endpoint(r *receiver, events ...string) webhooks.Created {
	g.t.Helper()
	if len(events) == 0 {
		events = []string{"*"}
	}
	url := r.srv.URL
	c, err := g.svc.Create(context.Background(), g.actor, webhooks.Params{URL: &url, EnabledEvents: &events})
	if err != nil {
		g.t.Fatal(err)
	}
	return c
}

// agent creates an agent (an ai_agent.created event) and returns the event.
func (g *rig) agent(name string) domain.Event {
	g.t.Helper()
	ag := storetest.Agent(g.t, g.st, g.actor.AccountID, name, time.Now())
	evs, err := g.st.ListEvents(context.Background(), store.EventQuery{AccountID: g.actor.AccountID, Limit: 1000})
	if err != nil {
		g.t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.AgentID == ag.ID && ev.Type == domain.EventAgentCreated {
			return ev
		}
	}
	g.t.Fatalf("no event for agent %s", ag.ID)
	return domain.Event{}
}

// attempts lists the endpoint's attempts, newest first.
func (g *rig) attempts(endpointID string) []domain.WebhookAttempt {
	g.t.Helper()
	as, err := g.st.ListAttempts(context.Background(), store.AttemptQuery{AccountID: g.actor.AccountID, EndpointID: endpointID, Limit: 100})
	if err != nil {
		g.t.Fatal(err)
	}
	return as
}

// waitAttempts waits until the endpoint has n attempts recorded and
// returns the newest.
func (g *rig) waitAttempts(endpointID string, n int) domain.WebhookAttempt {
	g.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		as := g.attempts(endpointID)
		if len(as) >= n {
			return as[0]
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("endpoint %s: %d attempts recorded, want %d", endpointID, len(as), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (g *rig) getEndpoint(id string) domain.WebhookEndpoint {
	g.t.Helper()
	e, err := g.st.GetWebhookEndpoint(context.Background(), g.actor.AccountID, id)
	if err != nil {
		g.t.Fatal(err)
	}
	return e
}
