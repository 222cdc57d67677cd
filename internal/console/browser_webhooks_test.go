package console_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentapi/agentapi/internal/domain"
)

// seedWebhooks gives the account three endpoints: one healthy with a
// deliveries log of every kind (delivered, pending after a 503 with an
// HTML answer, a timeout, a refused address), one with a long address,
// and one disabled for failing. It returns the healthy one.
func seedWebhooks(f *fixture, a domain.Account, owner domain.User) domain.WebhookEndpoint {
	f.t.Helper()
	ep := f.endpoint(owner, "https://hooks.example.com/agentapi/events", "Billing sync: revokes cached keys", "api_key.*", "ai_agent.created")
	f.endpoint(owner, "https://a-rather-long-subdomain.internal-tools.example.org/webhooks/agentapi/v2/receive?tenant=acme-production&region=eu-west-1",
		"", "*")
	down := f.endpoint(owner, "https://old-receiver.example.net/hook", "The receiver we retired", "ai_agent.*")
	f.agent(a, "Support desk")
	f.attempt(ep.ID, attemptSpec{status: 200, body: `{"ok":true}`, ms: 87}, 0)
	f.attempt(down.ID, attemptSpec{errCode: "connection_refused", retry: time.Hour}, 0)
	f.clock.Advance(5*24*time.Hour + time.Minute)
	f.agent(a, "Billing helper")
	f.attempt(down.ID, attemptSpec{errCode: "connection_refused", retry: time.Hour}, 5*24*time.Hour)
	f.attempt(ep.ID, attemptSpec{status: 503, ms: 1204, retry: 5 * time.Minute,
		body: "<html><head><title>503 Service Unavailable</title></head><body><h1>Service Unavailable</h1><p>The server is temporarily unable to service your request due to maintenance downtime or capacity problems. Please try again later.</p></body></html>"}, 0)
	f.sendTest(owner, ep.ID)
	f.attempt(ep.ID, attemptSpec{errCode: "timeout", ms: 15000, retry: 5 * time.Second}, 0)
	f.sendTest(owner, ep.ID)
	f.attempt(ep.ID, attemptSpec{errCode: "address_not_allowed", ms: 3, retry: 5 * time.Second}, 0)
	return ep
}

// TestBrowserWebhooks walks the webhook pages in headless Chromium at 1400
// and 400 pixels: the list (three endpoints, one disabled for failing, one
// with a long address), adding an endpoint and its secret shown once, the
// endpoint's page with its deliveries log (an answer unfolded), rotating
// the secret. Nothing may stick out sideways at 400. Screenshots go to
// $AGENTAPI_ARTIFACTS_DIR as webhooks-<step>-<width>.png.
func TestBrowserWebhooks(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	ep := seedWebhooks(f, a, owner)
	b := newTab(t, f.srv.URL, 1400, 150*time.Second)
	look := func(name string) {
		t.Helper()
		for _, width := range []int64{1400, 400} {
			b.do("viewport", chromedp.EmulateViewport(width, 900))
			if width == 400 {
				for _, js := range []string{overflowJS, placeholdersJS} {
					if got := b.eval(name+" at 400", js); got != "ok" {
						t.Errorf("%s at 400 pixels: %s", name, got)
					}
				}
			}
			b.shot(fmt.Sprintf("webhooks-%s-%d", name, width))
		}
		b.do("viewport", chromedp.EmulateViewport(1400, 900))
	}
	base := f.srv.URL
	b.signIn(owner.Email, testPassword, "nav-webhooks")
	b.do("list", chromedp.Click(chromedp.ID("nav-webhooks")), chromedp.WaitVisible(chromedp.ID("endpoints")))
	if n := b.count("#endpoints tr.row-disabled"); n != 1 {
		t.Errorf("%d endpoints shown disabled, want 1", n)
	}
	look("01-list")

	b.do("new", chromedp.Click(chromedp.ID("new-endpoint")), chromedp.WaitVisible(chromedp.ID("endpoint-url")),
		chromedp.SendKeys(chromedp.ID("endpoint-url"), "http://insecure.example.com/hook"),
		chromedp.Click(chromedp.ID("save-endpoint")), chromedp.WaitVisible(chromedp.ID("url-error")))
	look("02-bad-url")
	b.do("add", chromedp.Navigate(base+webhooksPath+"/new"), chromedp.WaitVisible(chromedp.ID("endpoint-url")),
		chromedp.SendKeys(chromedp.ID("endpoint-url"), "https://ops.example.com/agentapi"),
		chromedp.Click(chromedp.ID("save-endpoint")), chromedp.WaitVisible(chromedp.ID("signing-secret")))
	secret := b.text("secret", "signing-secret")
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the secret page shows %q", secret)
	}
	f.secrets = append(f.secrets, secret)
	look("03-secret")
	b.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("edit-endpoint")))
	if strings.Contains(b.eval("page", "document.body.innerText"), secret) {
		t.Fatal("a reload shows the secret again")
	}

	b.do("endpoint", chromedp.Navigate(base+webhooksPath+"/"+ep.ID), chromedp.WaitVisible(chromedp.ID("deliveries")),
		chromedp.Click(chromedp.CSS("details.answer summary")))
	if n := b.count("#deliveries tbody tr[data-attempt-id]"); n != 4 {
		t.Errorf("the log shows %d attempts, want 4", n)
	}
	look("04-endpoint")
	b.do("rotate", chromedp.Click(chromedp.ID("rotate-secret")), chromedp.WaitVisible(chromedp.ID("rotate-secret-form")))
	look("05-rotate")
	b.do("rotated", chromedp.Click(chromedp.ID("confirm-rotate-secret")), chromedp.WaitVisible(chromedp.ID("signing-secret")))
	f.secrets = append(f.secrets, b.text("rotated secret", "signing-secret"))
	if msg, ok := b.dialog(); !ok || !strings.Contains(msg, "signing secret") {
		t.Errorf("rotation asked %q", msg)
	}
	look("06-rotated")
	b.do("disabled", chromedp.Navigate(base+webhooksPath), chromedp.WaitVisible(chromedp.ID("endpoints")),
		chromedp.Click(chromedp.CSS("#endpoints tr.row-disabled a")), chromedp.WaitVisible(chromedp.ID("disabled-notice")))
	look("07-disabled")
	b.do("audit", chromedp.Navigate(base+"/console/developers/audit"), chromedp.WaitVisible(chromedp.ID("audit")))
	look("08-audit")
}
