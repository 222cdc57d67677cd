package console_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// seedAnomalies gives key id, already after_idle, the other two anomalies
// through the usage flush: a week of requests from one network, then one
// from a new network and a burst of 2,400 requests.
func seedAnomalies(t *testing.T, f *fixture, accountID, keyID string) {
	t.Helper()
	ctx := context.Background()
	now := f.clock.Now()
	log := func(at time.Time, client string) []requestlog.Log {
		return []requestlog.Log{{ID: fmt.Sprintf("req_%d", at.UnixNano()), AccountID: accountID, KeyID: keyID, At: at,
			Method: "GET", Route: "GET /v1/me", Path: "/v1/me", Status: 200, Client: client}}
	}
	for _, l := range [][]requestlog.Log{log(now.Add(-8*24*time.Hour), "203.0.113.7"), log(now.Add(-time.Hour), "203.0.113.7"),
		log(now, "198.51.100.23")} {
		if err := f.st.WriteUsage(ctx, l, nil); err != nil {
			t.Fatal(err)
		}
	}
	burst := []store.UsageCount{{AccountID: accountID, KeyID: keyID, Class: requestlog.Class2xx, Minute: now, Count: 2400}}
	if err := f.st.WriteUsage(ctx, nil, burst); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserKeyNotices looks at a key's three notices on its page and on
// Developers at 1400 and 400 pixels (nothing sticks out at 400), then
// dismisses one with its button.
// Screenshots go to $AGENTAPI_ARTIFACTS_DIR as notices-<page>-<width>.png.
func TestBrowserKeyNotices(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	id := idleKeyNotice(t, f, a, owner, "Billing sync (production)")
	seedAnomalies(t, f, a.ID, id)
	b := newTab(t, f.srv.URL, 1400, 120*time.Second)
	b.signIn(owner.Email, testPassword, "new-key")
	look := func(name, path string) {
		t.Helper()
		b.do(name, chromedp.Navigate(f.srv.URL+path), chromedp.WaitVisible(chromedp.ID("key-notices")))
		if n := b.count("#key-notices .key-notice"); n != 3 {
			t.Errorf("%s: %d notices, want 3", name, n)
		}
		for _, width := range []int64{1400, 400} {
			b.do("viewport", chromedp.EmulateViewport(width, 900))
			if width == 400 {
				if got := b.eval(name+" at 400", overflowJS); got != "ok" {
					t.Errorf("%s at 400 pixels: %s", name, got)
				}
			}
			b.shot(fmt.Sprintf("notices-%s-%d", name, width))
		}
		b.do("viewport", chromedp.EmulateViewport(1400, 900))
	}
	look("keys", "/console/developers")
	look("key", "/console/developers/keys/"+id)
	b.do("dismiss", chromedp.Click(chromedp.CSS(`#key-notices .key-notice[data-reason="spike"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice-ok`)))
	if n := b.count("#key-notices .key-notice"); n != 2 {
		t.Errorf("after dismissing the spike: %d notices, want 2", n)
	}
	evs, err := f.st.ListKeyAuditEvents(context.Background(), a.ID, id)
	if err != nil || len(evs) == 0 || evs[0].Action != domain.AuditNoticeDismissed {
		t.Errorf("the newest entry of the key's trail: %+v, %v", evs, err)
	}
}
