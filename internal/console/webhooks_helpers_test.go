package console_test

import (
	"context"
	"html"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/webhooks"
)

// secretRE is a webhook signing secret as a page shows it (its + escaped
// by html/template).
var secretRE = regexp.MustCompile(`whsec_(?:[0-9A-Za-z/=]|&#43;)+`)

// webhookService is the service the console uses, on the fixture's store
// and clock, for seeding.
func (f *fixture) webhookService() *webhooks.Service { return webhooks.New(f.st, f.clock.Now, nil) }

// endpoint adds an endpoint subscribed to events as by, through the
// service; its secret joins the secrets the log must not hold.
func (f *fixture) endpoint(by domain.User, rawURL, description string, events ...string) domain.WebhookEndpoint {
	f.t.Helper()
	c, err := f.webhookService().Create(context.Background(), webhooks.Actor{AccountID: by.AccountID, UserID: by.ID, Label: by.Email},
		webhooks.Params{URL: &rawURL, Description: &description, EnabledEvents: &events})
	if err != nil {
		f.t.Fatal(err)
	}
	f.secrets = append(f.secrets, c.Secret)
	return c.Endpoint
}

// attemptSpec is the result of one attempt the tests record.
type attemptSpec struct {
	status  int    // the answer's status, 0 for none
	errCode string // the failure's class ("" for an answer)
	body    string
	ms      int64
	// retry: the delivery stays pending, its next attempt in retry.
	retry time.Duration
}

// attempt claims the endpoint's due deliveries and records spec as the
// result of each, at the fixture's clock; it returns how many it recorded.
// An endpoint failing since failingFor ago is disabled (0: never).
func (f *fixture) attempt(endpointID string, spec attemptSpec, failingFor time.Duration) int {
	f.t.Helper()
	ctx := context.Background()
	// The store dates a delivery by the wall clock: due at the later.
	now := f.clock.Now()
	if wall := time.Now().UTC().Truncate(time.Millisecond).Add(time.Millisecond); wall.After(now) {
		now = wall
	}
	due, err := f.st.ClaimDeliveries(ctx, endpointID, "test-lease", now, now.Add(30*time.Second), 100)
	if err != nil {
		f.t.Fatal(err)
	}
	if failingFor == 0 {
		failingFor = 1000 * time.Hour
	}
	for _, d := range due {
		a := domain.WebhookAttempt{ID: domain.NewID("wha", now), EndpointID: endpointID, EventID: d.Event.ID, EventType: d.Event.Type,
			Attempt: d.Attempt, Status: "failed", ResponseStatus: spec.status, Error: spec.errCode, LatencyMS: spec.ms,
			ResponseBody: spec.body, CreatedAt: now}
		o := store.Outcome{Attempt: a, Token: d.Token, FailingFor: failingFor}
		switch {
		case spec.errCode == "" && spec.status >= 200 && spec.status < 300:
			o.Attempt.Status, o.Delivered = "succeeded", true
		case spec.retry > 0:
			next := now.Add(spec.retry)
			o.Next = &next
		}
		if _, err := f.st.RecordAttempt(ctx, o, disabledEvent(now)); err != nil {
			f.t.Fatal(err)
		}
		f.clock.Advance(time.Millisecond)
	}
	return len(due)
}

// disabledEvent is what the delivery worker records when it disables an
// endpoint (internal/webhooks), in short.
func disabledEvent(now time.Time) func(domain.WebhookEndpoint) (domain.Event, domain.AuditEvent, error) {
	return func(e domain.WebhookEndpoint) (domain.Event, domain.AuditEvent, error) {
		return domain.Event{ID: domain.NewID("evt", now), AccountID: e.AccountID, Type: domain.EventWebhookEndpointDisabled,
				CreatedAt: now, Data: []byte(`{"id":"` + e.ID + `"}`), Endpoint: e.ID, Actor: &domain.EventActor{Type: "system", ID: "webhooks"}},
			domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, now), AccountID: e.AccountID, Action: domain.AuditWebhookDisabled,
				Actor: "system", Detail: e.ID + " " + e.URL + ": disabled because no delivery succeeded for 5 days", CreatedAt: now}, nil
	}
}

// sendTest records a webhook.test event for the endpoint, as its button does.
func (f *fixture) sendTest(by domain.User, endpointID string) domain.Event {
	f.t.Helper()
	ev, err := f.webhookService().SendTest(context.Background(), webhooks.Actor{AccountID: by.AccountID, UserID: by.ID, Label: by.Email}, endpointID)
	if err != nil {
		f.t.Fatal(err)
	}
	return ev
}

// revealedSecret posts a form that shows a new signing secret and follows
// it to the page that shows it once: the POST must answer 303 with no
// secret in its Location or in any cookie, the page must not be cached and
// must hold the secret once. It returns the page and the secret.
func (b *browser) revealedSecret(from, path string, form url.Values) (page, string) {
	b.f.t.Helper()
	p := b.post(from, path, form)
	wantRedirect(b.f.t, "POST "+path, p, "/console/developers/webhooks/we_")
	loc := p.header.Get("Location")
	if !regexp.MustCompile(`^/console/developers/webhooks/we_[0-9a-z]+/secret(\?rotated=1)?$`).MatchString(loc) {
		b.f.t.Fatalf("POST %s: Location %q", path, loc)
	}
	shown := b.get(loc)
	wantStatus(b.f.t, "GET "+loc, shown, 200)
	all := secretRE.FindAllString(shown.body, -1)
	if len(all) != 1 {
		b.f.t.Fatalf("the secret page shows %d secrets, want 1:\n%s", len(all), shown.body)
	}
	secret := html.UnescapeString(all[0])
	b.f.secrets = append(b.f.secrets, secret)
	raw := strings.TrimPrefix(secret, "whsec_")
	for _, h := range []string{"Location", "Set-Cookie"} {
		for _, v := range append(p.header.Values(h), shown.header.Values(h)...) {
			if strings.Contains(v, raw) || strings.Contains(v, url.QueryEscape(raw)) {
				b.f.t.Fatalf("the secret is in a %s header: %q", h, v)
			}
		}
	}
	if shown.header.Get("Cache-Control") != "no-store" {
		b.f.t.Fatalf("secret page: Cache-Control %q", shown.header.Get("Cache-Control"))
	}
	return shown, secret
}
