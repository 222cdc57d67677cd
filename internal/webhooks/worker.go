package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/agentapi/agentapi/client/webhook"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/egress"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/wire"
)

// Retries is the wait before each retry, counted from the attempt before
// it: 8 attempts over about 27.6 hours (docs/webhooks.md, Retries), each
// wait varied by up to ±10 %.
var Retries = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// Delivery rules (docs/webhooks.md).
const (
	// DisableAfter: an endpoint with no 2xx for this long while failing is
	// disabled.
	DisableAfter = 5 * 24 * time.Hour
	// maxRetryAfter bounds how long a Retry-After on 429 or 503 delays.
	maxRetryAfter = time.Hour
	// lease is how long a claimed delivery is held: past an attempt's
	// whole time-out, so that only an instance that died lets it go.
	lease = 30 * time.Second
)

// Poster sends one attempt; *egress.Client is the one serve uses.
type Poster interface {
	Post(ctx context.Context, url string, header http.Header, body []byte) (egress.Result, error)
}

// WorkerConfig bounds a Worker; zero values take the defaults.
type WorkerConfig struct {
	// Slots is how many attempts this instance makes at once (32).
	Slots int
	// PerEndpoint is how many of them one endpoint may hold (4), so that a
	// slow or dead endpoint never takes the others' turns.
	PerEndpoint int
	// Poll is how often the store is asked for due deliveries when no
	// commit of this instance wrote one (1 s).
	Poll time.Duration
}

// Worker delivers due events: it claims deliveries with a lease in the
// store, posts them signed, and records each attempt's result. Many
// instances run one each; the leases keep one attempt per delivery in
// flight across them.
type Worker struct {
	store  *store.Store
	post   Poster
	now    func() time.Time
	log    *slog.Logger
	cfg    WorkerConfig
	wakeCh chan struct{}

	mu       sync.Mutex
	inFlight map[string]int // by endpoint
	total    int
	wg       sync.WaitGroup
}

// NewWorker returns a Worker; call Run to start it. It wakes at once when
// a commit of st writes deliveries.
func NewWorker(st *store.Store, post Poster, now func() time.Time, log *slog.Logger, cfg WorkerConfig) *Worker {
	if now == nil {
		now = time.Now
	}
	if cfg.Slots <= 0 {
		cfg.Slots = 32
	}
	if cfg.PerEndpoint <= 0 {
		cfg.PerEndpoint = 4
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	w := &Worker{store: st, post: post, now: now, log: log, cfg: cfg, wakeCh: make(chan struct{}, 1), inFlight: map[string]int{}}
	st.SetDeliveryWake(w.wake)
	return w
}

func (w *Worker) wake() {
	select {
	case w.wakeCh <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then waits for the attempts in flight
// (each bounded by its 15 s time-out). An attempt cut short by the end
// leaves its lease to run out, and another instance (or the next start)
// makes it again: at least once.
func (w *Worker) Run(ctx context.Context) {
	t := time.NewTicker(w.cfg.Poll)
	defer t.Stop()
	for {
		w.round(ctx)
		select {
		case <-ctx.Done():
			w.wg.Wait()
			return
		case <-t.C:
		case <-w.wakeCh:
		}
	}
}

// round claims what free slots allow, endpoint by endpoint.
func (w *Worker) round(ctx context.Context) {
	if w.free() == 0 {
		return
	}
	now := w.now()
	ids, err := w.store.DueEndpoints(ctx, now, 1000)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Error("webhooks: list due endpoints", "err", err)
		}
		return
	}
	for _, id := range ids {
		n := w.reserve(id)
		if n == 0 {
			continue
		}
		due, err := w.store.ClaimDeliveries(ctx, id, domain.NewID("lease", now), now, now.Add(lease), n)
		if err != nil && ctx.Err() == nil {
			w.log.Error("webhooks: claim deliveries", "endpoint", id, "err", err)
		}
		w.release(id, n-len(due))
		for _, d := range due {
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				defer w.release(d.Endpoint.ID, 1)
				w.attempt(context.WithoutCancel(ctx), d)
			}()
		}
	}
}

func (w *Worker) free() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cfg.Slots - w.total
}

// reserve takes up to the endpoint's free share of the free slots.
func (w *Worker) reserve(endpoint string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := min(w.cfg.PerEndpoint-w.inFlight[endpoint], w.cfg.Slots-w.total)
	if n <= 0 {
		return 0
	}
	w.inFlight[endpoint] += n
	w.total += n
	return n
}

func (w *Worker) release(endpoint string, n int) {
	if n <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inFlight[endpoint] -= n
	w.total -= n
	if w.inFlight[endpoint] <= 0 {
		delete(w.inFlight, endpoint)
	}
}

// attempt posts one delivery and records what came of it.
func (w *Worker) attempt(ctx context.Context, d store.Due) {
	start := w.now()
	body, err := json.Marshal(wire.EventOf(d.Event))
	if err != nil {
		w.log.Error("webhooks: encode event", "event", d.Event.ID, "err", err)
		return
	}
	sig, err := webhook.SignAll(d.Endpoint.Secrets(start), d.Event.ID, start, body)
	if err != nil {
		w.log.Error("webhooks: sign", "endpoint", d.Endpoint.ID, "err", err)
		return
	}
	h := http.Header{}
	h.Set(webhook.HeaderID, d.Event.ID)
	h.Set(webhook.HeaderTimestamp, strconv.FormatInt(start.Unix(), 10))
	h.Set(webhook.HeaderSignature, sig)
	h.Set("Content-Type", "application/json")
	res, err := w.post.Post(ctx, d.Endpoint.URL, h, body)
	o := w.outcome(d, start, res, err)
	reason, err := w.store.RecordAttempt(ctx, o, w.disabledEvent)
	if err != nil {
		w.log.Error("webhooks: record attempt", "endpoint", d.Endpoint.ID, "event", d.Event.ID, "err", err)
		return
	}
	if reason != "" {
		w.log.Warn("webhooks: endpoint disabled", "endpoint", d.Endpoint.ID, "account", d.Endpoint.AccountID, "reason", reason)
	}
}

// outcome judges an attempt: 2xx delivered; 410 gone (no retry, the
// endpoint disabled); anything else retried on the schedule, a
// Retry-After on 429 or 503 honoured up to an hour.
func (w *Worker) outcome(d store.Due, start time.Time, res egress.Result, err error) store.Outcome {
	a := domain.WebhookAttempt{ID: domain.NewID("wha", start), EndpointID: d.Endpoint.ID, EventID: d.Event.ID,
		EventType: d.Event.Type, Attempt: d.Attempt, Status: "failed", ResponseStatus: res.StatusCode,
		LatencyMS: res.Latency.Milliseconds(), ResponseBody: string(res.Body), CreatedAt: start.UTC()}
	if err != nil {
		var ee *egress.Error
		a.Error = egress.ClassConnectionError
		if errors.As(err, &ee) {
			a.Error = ee.Class
		}
	}
	o := store.Outcome{Attempt: a, Token: d.Token, FailingFor: DisableAfter}
	switch {
	case err == nil && res.StatusCode >= 200 && res.StatusCode < 300:
		o.Attempt.Status, o.Delivered = "succeeded", true
	case err == nil && res.StatusCode == http.StatusGone:
		o.Gone = true
	case d.Attempt <= len(Retries):
		next := start.Add(jitter(Retries[d.Attempt-1]))
		if ra := retryAfter(res); ra > 0 {
			next = later(next, start.Add(ra))
		}
		o.Next = &next
	}
	return o
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// jitter varies d by up to ±10 %.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*0.2-0.1)*float64(d))
}

// retryAfter is a 429's or 503's Retry-After in seconds, at most an hour.
func retryAfter(res egress.Result) time.Duration {
	if res.StatusCode != http.StatusTooManyRequests && res.StatusCode != http.StatusServiceUnavailable {
		return 0
	}
	secs, err := strconv.Atoi(res.Header.Get("Retry-After"))
	if err != nil || secs <= 0 {
		return 0
	}
	return min(time.Duration(secs)*time.Second, maxRetryAfter)
}

// disabledEvent is the webhook_endpoint.disabled event and audit entry of
// an endpoint the worker disabled.
func (w *Worker) disabledEvent(e domain.WebhookEndpoint) (domain.Event, domain.AuditEvent, error) {
	now := w.now().UTC().Truncate(time.Millisecond)
	data, err := json.Marshal(wire.WebhookEndpointOf(e))
	if err != nil {
		return domain.Event{}, domain.AuditEvent{}, fmt.Errorf("encode endpoint: %w", err)
	}
	why := "it answered 410 Gone"
	if e.DisabledReason == domain.DisabledFailing {
		why = "no delivery succeeded for 5 days"
	}
	return domain.Event{ID: domain.NewID("evt", now), AccountID: e.AccountID, Type: domain.EventWebhookEndpointDisabled,
			CreatedAt: now, Data: data, Endpoint: e.ID, Actor: &domain.EventActor{Type: "system", ID: "webhooks"}},
		domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, now), AccountID: e.AccountID, Action: domain.AuditWebhookDisabled,
			Actor: "system", Detail: e.ID + " " + e.URL + ": disabled because " + why, CreatedAt: now}, nil
}
