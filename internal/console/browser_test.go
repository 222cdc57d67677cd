package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentapi/agentapi/internal/domain"
)

// TestBrowserKeyLifecycle drives the console in headless Chromium against the
// real handler (API and console) on a loopback server: an Owner signs in,
// creates a restricted key from a preset, uses it on the API, rotates it,
// revokes the old key and sees the API refuse it; an agent-role user finds
// no Developers. Screenshots of the main pages are saved as artifacts.
func TestBrowserKeyLifecycle(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	support := f.agent(a, "Support bot")
	f.agent(a, "Sales bot")
	agentUser := f.user(a, "agent@acme.example", domain.RoleAgent)
	ctx := context.Background()
	if err := f.st.RecordQuestion(ctx, domain.Question{
		ID: domain.NewID(domain.PrefixQuestion, f.clock.Now()), AccountID: a.ID, AgentID: support.ID,
		ConversationID: domain.NewID(domain.PrefixConvo, f.clock.Now()), Question: "Can I change my delivery address?",
		Answer: "Yes: open the order, choose Edit address, and save before it ships.", CreatedAt: f.clock.Now(), AnswerMS: 842,
	}, true, false); err != nil {
		t.Fatal(err)
	}

	b := newTab(t, f.srv.URL, 1360, 90*time.Second)
	base := f.srv.URL

	// Sign in as the Owner.
	b.do("open console", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.ID("email")))
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil || !strings.HasPrefix(loc, base+"/console/signin") {
		t.Fatalf("signed out, landed on %s (%v)", loc, err)
	}
	b.shot("01-signin")
	b.do("sign in",
		chromedp.SendKeys(chromedp.ID("email"), owner.Email),
		chromedp.SendKeys(chromedp.ID("password"), testPassword),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("new-key")))
	// The stylesheet applied under the CSP.
	if bg := b.eval("style", `getComputedStyle(document.querySelector('.topbar')).backgroundColor`); bg != "rgb(17, 24, 39)" {
		t.Fatalf("stylesheet not applied: topbar background %q", bg)
	}

	k, cred := browserCreateKey(t, f, b, a, support)
	browserRotateAndRevoke(t, f, b, k, cred)
	browserPagesAndAgentRole(t, b, owner, agentUser, support)
}

// browserCreateKey creates a key from a preset, restricted to support,
// and reloads its credential page: the credential shows once.
func browserCreateKey(t *testing.T, f *fixture, b *tab, a domain.Account, support domain.Agent) (domain.APIKey, string) {
	t.Helper()
	ctx, base := context.Background(), f.srv.URL
	f.clock.Advance(time.Second)
	b.do("new key form",
		chromedp.Click(chromedp.ID("new-key")),
		chromedp.WaitVisible(chromedp.ID("key-name")),
		chromedp.SendKeys(chromedp.ID("key-name"), "Helpdesk integration"),
		chromedp.SendKeys(chromedp.ID("key-description"), "Answers customers from the help widget"),
		chromedp.Click(chromedp.ID("preset-aiagent-query")),
		chromedp.Click(chromedp.ID("advanced-toggle")),
		chromedp.Click(chromedp.CSS(`input[name=agent][value="`+support.ID+`"]`)),
		chromedp.SetValue(chromedp.ID("expiry"), "90"))
	b.shot("02-create-key-form")
	b.do("create key", chromedp.Click(chromedp.ID("create-key")), chromedp.WaitVisible(chromedp.ID("credential")))
	cred := b.text("credential", "credential")
	if !credentialRE.MatchString(cred) {
		t.Fatalf("credential on the page: %q", cred)
	}
	f.secrets = append(f.secrets, cred)
	if h := b.eval("copy button", `String(document.querySelector('[data-copy]').hidden)`); h != "false" {
		t.Fatal("the copy button stayed hidden: console.js did not run")
	}
	b.shot("03-key-created")
	if got := f.apiStatus(cred); got != http.StatusOK {
		t.Fatalf("GET /v1/me with the new key: %d", got)
	}
	ks, err := f.keys.List(ctx, a.ID)
	if err != nil || len(ks) != 1 {
		t.Fatalf("keys: %v %d", err, len(ks))
	}
	k := ks[0]
	if len(k.AgentIDs) != 1 || k.AgentIDs[0] != support.ID || strings.Join(scopeStrings(k.Scopes), ",") != "aiagents:read,aiagents:query" || k.ExpiresAt == nil {
		t.Fatalf("created key: %+v", k)
	}
	if err := f.toucher.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// The create answered 303 to the credential's page; reloading it shows
	// the key's page, never the credential again, and makes no key.
	if loc, err := chromedp.Run(b.ctx, chromedp.Location()); err != nil || loc != base+"/console/developers/keys/"+k.ID+"/created" {
		t.Fatalf("after the create, the address bar shows %s (%v)", loc, err)
	}
	b.do("reload the credential page", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("rotate")))
	if gone := b.eval("credential after reload", `String(document.getElementById('credential') === null)`); gone != "true" {
		t.Fatal("a reload shows the credential again")
	}
	if ks, err := f.keys.List(ctx, a.ID); err != nil || len(ks) != 1 {
		t.Fatalf("keys after reload: %v %d", err, len(ks))
	}
	return k, cred
}

// wantDialog wants the confirmation dialog of what, saying each of want.
func wantDialog(t *testing.T, b *tab, what string, want ...string) {
	t.Helper()
	msg, ok := b.dialog()
	if !ok {
		t.Fatalf("%s asked for no confirmation", what)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Fatalf("%s dialog: %q", what, msg)
		}
	}
}

// browserRotateAndRevoke rotates key k (credential cred) from its page
// and revokes it through its confirmation page, both through dialogs.
func browserRotateAndRevoke(t *testing.T, f *fixture, b *tab, k domain.APIKey, cred string) {
	t.Helper()
	base := f.srv.URL

	// The list, then rotation from the key's page (through the dialog).
	b.do("developers", chromedp.Navigate(base+"/console/developers"), chromedp.WaitVisible(chromedp.ID("keys")))
	b.shot("04-developers")
	f.clock.Advance(time.Second)
	b.do("rotate",
		chromedp.Click(chromedp.CSS(`a[href="/console/developers/keys/`+k.ID+`"]`)),
		chromedp.WaitVisible(chromedp.ID("rotate")),
		chromedp.Click(chromedp.ID("rotate")),
		chromedp.WaitVisible(chromedp.ID("confirm-rotate")),
		chromedp.Click(chromedp.ID("confirm-rotate")),
		chromedp.WaitVisible(chromedp.ID("rotation")))
	wantDialog(t, b, "rotation", "second key")
	rotated := b.text("rotated credential", "credential")
	if !credentialRE.MatchString(rotated) || rotated == cred {
		t.Fatalf("rotated credential: %q", rotated)
	}
	f.secrets = append(f.secrets, rotated)
	b.shot("05-rotate")
	if f.apiStatus(rotated) != http.StatusOK || f.apiStatus(cred) != http.StatusOK {
		t.Fatal("both keys must work during rotation")
	}

	// Revoke the old key through its confirmation page.
	f.clock.Advance(time.Second)
	b.do("revoke",
		chromedp.Navigate(base+"/console/developers/keys/"+k.ID+"/revoke"),
		chromedp.WaitVisible(chromedp.ID("confirm-revoke")))
	b.shot("06-revoke-confirm")
	b.do("confirm revoke", chromedp.Click(chromedp.ID("confirm-revoke")), chromedp.WaitVisible(chromedp.ID("lineage")))
	wantDialog(t, b, "revocation", "Revoke", k.Prefix)
	if got := f.apiStatus(cred); got != http.StatusUnauthorized {
		t.Fatalf("revoked key: %d, want 401", got)
	}
	if f.apiStatus(rotated) != http.StatusOK {
		t.Fatal("the rotated key stopped working")
	}
	b.shot("07-key-after-revoke")
	b.do("developers after revoke", chromedp.Navigate(base+"/console/developers"), chromedp.WaitVisible(chromedp.ID("recent-events")))
	b.shot("07b-developers-after-revoke")
}

// browserPagesAndAgentRole shows the audit trail, agents and users to
// owner, then signs in as agentUser, who finds no Developers.
func browserPagesAndAgentRole(t *testing.T, b *tab, owner, agentUser domain.User, support domain.Agent) {
	t.Helper()
	base := b.base

	b.do("audit", chromedp.Navigate(base+"/console/developers/audit"), chromedp.WaitVisible(chromedp.ID("audit")))
	audit := b.text("audit", "audit")
	for _, want := range []string{"created", "rotated", "revoked", owner.Email} {
		if !strings.Contains(audit, want) {
			t.Fatalf("audit trail lacks %q:\n%s", want, audit)
		}
	}
	b.shot("08-audit")

	b.do("agents", chromedp.Navigate(base+"/console/agents"), chromedp.WaitVisible(chromedp.ID("agents")))
	b.shot("09-agents")
	b.do("agent", chromedp.Navigate(base+"/console/agents/"+support.ID), chromedp.WaitVisible(chromedp.ID("recent")))
	b.shot("10-agent")
	b.do("users", chromedp.Navigate(base+"/console/users"), chromedp.WaitVisible(chromedp.ID("users")))
	b.shot("11-users")

	// Sign out; an agent-role user finds no Developers.
	b.do("sign out and in as an agent-role user",
		chromedp.Click(chromedp.CSS(`form[action="/console/signout"] button`)),
		chromedp.WaitVisible(chromedp.ID("email")),
		chromedp.SendKeys(chromedp.ID("email"), agentUser.Email),
		chromedp.SendKeys(chromedp.ID("password"), testPassword),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("agents")))
	if n := b.eval("links", `String(document.querySelectorAll('a[href^="/console/developers"], a[href^="/console/users"]').length)`); n != "0" {
		t.Fatalf("an agent-role user sees %s Developers/Users links", n)
	}
	b.shot("12-agent-role")
	b.do("developers as agent", chromedp.Navigate(base+"/console/developers"), chromedp.WaitVisible(chromedp.CSS(".status-code")))
	if code := b.eval("status", `document.querySelector('.status-code').textContent.trim()`); code != "404" {
		t.Fatalf("developers as an agent-role user: %q", code)
	}
	b.shot("13-agent-role-developers-404")
}
