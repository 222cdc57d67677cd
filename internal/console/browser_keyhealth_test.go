package console_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
)

// TestBrowserKeyHealthAndPolicy walks key health and the key policy in
// headless Chromium at 1400 and 400 pixels: the health page with keys of
// every flag and a healthy one, the policy form (an Owner saves a 90-day
// maximum with addresses required), the new-key form stating the policy
// and its refusal of a key without addresses shown on that field, and an
// Admin's read-only policy. Nothing may stick out sideways at 400.
// Screenshots go to $AGENTAPI_ARTIFACTS_DIR as keyhealth-<step>-<width>.png.
func TestBrowserKeyHealthAndPolicy(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	admin := f.user(a, "admin@acme.example", domain.RoleAdmin)
	seedKeyHealth(t, f, a, owner)
	b := newTab(t, f.srv.URL, 1400, 200*time.Second)
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
			b.shot(fmt.Sprintf("keyhealth-%s-%d", name, width))
		}
		b.do("viewport", chromedp.EmulateViewport(1400, 900))
	}
	b.signIn(owner.Email, testPassword, "new-key")
	b.do("health", chromedp.Click(chromedp.ID("health-link")), chromedp.WaitVisible(chromedp.ID("health")))
	if n := b.count(`#health li[data-flag]`); n < 6 {
		t.Errorf("%d flags on the health page, want at least 6", n)
	}
	look("health")
	b.do("policy", chromedp.Click(chromedp.ID("policy-link")), chromedp.WaitVisible(chromedp.ID("policy-form")))
	look("policy")
	b.do("save policy", chromedp.SendKeys(chromedp.ID("max-lifetime"), "90"), chromedp.Click(chromedp.ID("require-ips")),
		chromedp.Click(chromedp.ID("save-policy")), chromedp.WaitVisible(chromedp.CSS(".notice-ok")))
	look("policy-saved")
	b.do("new key", chromedp.Navigate(f.srv.URL+"/console/developers/keys/new"), chromedp.WaitVisible(chromedp.ID("key-policy-note")),
		chromedp.SendKeys(chromedp.ID("key-name"), "Warehouse export"), chromedp.Click(chromedp.ID("create-key")),
		chromedp.WaitVisible(chromedp.ID("allowed-ips-error")))
	look("newkey-refused")
	b.do("sign out", chromedp.Click(chromedp.CSS(`form[action="/console/signout"] button`)), chromedp.WaitVisible(chromedp.ID("email")))
	b.signIn(admin.Email, testPassword, "new-key")
	b.do("admin policy", chromedp.Navigate(f.srv.URL+"/console/developers/policy"), chromedp.WaitVisible(chromedp.ID("policy-readonly")))
	look("policy-admin")
}

// seedKeyHealth gives the account keys of each health flag: a full-access
// key without expiry or addresses, one unused for 100 days, one never
// used, and a healthy one.
func seedKeyHealth(t *testing.T, f *fixture, a domain.Account, owner domain.User) {
	t.Helper()
	ctx := context.Background()
	actor := keys.Actor{User: &owner}
	addrs, _ := domain.ParseAllowList("203.0.113.0/24, 2001:db8::/48")
	full, _ := domain.PresetByID("full-access")
	mk := func(name string, scopes []domain.Scope, allowed domain.AllowList, lifetime time.Duration) domain.APIKey {
		p := keys.CreateParams{AccountID: a.ID, Name: name, Scopes: scopes, AllowedIPs: allowed}
		if lifetime > 0 {
			e := f.clock.Now().Add(lifetime)
			p.ExpiresAt = &e
		}
		c, err := f.keys.Create(ctx, actor, p)
		if err != nil {
			t.Fatal(err)
		}
		f.secrets = append(f.secrets, c.Credential)
		return c.Key
	}
	read := []domain.Scope{domain.ScopeAgentsRead}
	idle := mk("Old reporting job", read, addrs, 400*24*time.Hour)
	mk("Admin script (everything, from anywhere)", full.Scopes, nil, 0)
	mk("Staging smoke test", read, addrs, 300*24*time.Hour)
	good := mk("Billing sync (production)", read, addrs, 300*24*time.Hour)
	if err := f.st.TouchKeys(ctx, map[string]time.Time{idle.ID: f.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(100 * 24 * time.Hour)
	if err := f.st.TouchKeys(ctx, map[string]time.Time{good.ID: f.clock.Now()}); err != nil {
		t.Fatal(err)
	}
}
