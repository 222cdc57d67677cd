package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/store"
)

// TestBrowserListsAndForms walks the console's lists and key forms in
// headless Chromium with more rows than a page holds, at 1280 and at 390
// pixels: the keys list (search, status filter, next page, "expires soon",
// no horizontal scroll at 1280), the key form (agent picker search, a scope
// ticked under a preset flipping to Custom, a field-level error), editing
// a key, rotation with a scheduled end for the old key, the audit trail and
// the users list; at 390 the header does not overlap the page and Sign out
// is on screen. Screenshots of each go to $AGENTAPI_ARTIFACTS_DIR.
func TestBrowserListsAndForms(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	agents, billing := seedLists(t, f, a, owner)

	b := newTab(t, f.srv.URL, 1280, 150*time.Second)
	b.prefix = "lists"
	narrow := narrowCheck(t, b)
	b.signIn(owner.Email, testPassword, "new-key")
	browserKeysList(t, b, billing, narrow)
	made := browserKeyForm(t, f, b, a, agents, narrow)
	browserEditAndRotate(t, f, b, a, made, narrow)

	// The audit trail and the users, a page each.
	base := f.srv.URL
	b.do("audit", chromedp.Navigate(base+"/console/developers/audit"), chromedp.WaitVisible(chromedp.ID("audit")))
	if n := b.count("#audit tbody tr"); n != 50 {
		t.Fatalf("the audit trail shows %d rows, want 50", n)
	}
	b.shots("08-audit", narrow)
	b.do("users", chromedp.Navigate(base+"/console/users"), chromedp.WaitVisible(chromedp.ID("users")))
	if n := b.count("#users tbody tr"); n != 50 {
		t.Fatalf("the users list shows %d rows, want 50", n)
	}
	b.shots("09-users", narrow)
}

// seedLists gives account a 70 agents, 55 users and 61 keys (some
// expiring soon, some revoked), the last "Billing sync".
func seedLists(t *testing.T, f *fixture, a domain.Account, owner domain.User) ([]domain.Agent, keys.Created) {
	t.Helper()
	ctx := context.Background()
	var agents []domain.Agent
	for i := range 70 {
		agents = append(agents, f.agent(a, fmt.Sprintf("Agent %03d", i)))
	}
	for i := range 55 {
		f.user(a, fmt.Sprintf("user%02d@acme.example", i), domain.RoleAgent)
	}
	soon := f.clock.Now().Add(3 * 24 * time.Hour)
	for i := range 60 {
		p := keys.CreateParams{AccountID: a.ID, Name: fmt.Sprintf("Service %02d", i), Scopes: domain.Presets[2].Scopes,
			AgentIDs: []string{agents[i%len(agents)].ID}, Description: "Nightly export to the warehouse (production)"}
		if i%10 == 0 {
			p.ExpiresAt = &soon
		}
		c, err := f.keys.Create(ctx, domainActor(owner), p)
		if err != nil {
			t.Fatal(err)
		}
		f.secrets = append(f.secrets, c.Credential)
		if i%7 == 0 {
			if err := f.keys.Revoke(ctx, domainActor(owner), a.ID, c.Key.ID); err != nil {
				t.Fatal(err)
			}
		}
		f.clock.Advance(time.Millisecond)
	}
	return agents, f.key(a, owner, "Billing sync")
}

// narrowCheck is b's check at 390 pixels: the header must not overlap the
// page and Sign out must be on screen.
func narrowCheck(t *testing.T, b *tab) func(name string) {
	return func(name string) {
		t.Helper()
		layout := b.eval("narrow layout", `(function () {
			var top = document.querySelector('.topbar').getBoundingClientRect();
			var main = document.querySelector('.shell').getBoundingClientRect();
			var out = document.querySelector('form[action="/console/signout"] button').getBoundingClientRect();
			var who = document.querySelector('.brand').getBoundingClientRect();
			if (main.top < top.bottom - 0.5) { return 'header overlaps the page: ' + top.bottom + ' > ' + main.top; }
			if (out.right > 390 || out.left < 0 || out.width === 0) { return 'Sign out off screen: ' + out.left + '..' + out.right; }
			if (out.top < who.bottom && out.left < who.right) { return 'Sign out overlaps the brand'; }
			return 'ok';
		})()`)
		if layout != "ok" {
			t.Errorf("%s at 390 pixels: %s", name, layout)
		}
	}
}

// browserKeysList pages, searches and filters the keys list: one page of
// 50, newest first, fitting 1280 pixels.
func browserKeysList(t *testing.T, b *tab, billing keys.Created, narrow func(string)) {
	t.Helper()
	base := b.base
	b.do("developers", chromedp.Navigate(base+"/console/developers"), chromedp.WaitVisible(chromedp.ID("keys")))
	if n := b.count("#keys tbody tr, #ended-keys tbody tr"); n != 50 {
		t.Fatalf("the keys list shows %d rows, want 50", n)
	}
	if fits := b.eval("table width", `(function () { var w = document.querySelector('.tablewrap'); return String(w.scrollWidth <= w.clientWidth); })()`); fits != "true" {
		t.Errorf("the keys table scrolls sideways at 1280 pixels: %s", b.eval("widths", `(function () { var w = document.querySelector(".tablewrap"); return w.scrollWidth + " > " + w.clientWidth; })()`))
	}
	if n := b.count("#keys .badge-soon"); n == 0 {
		t.Error("no key is marked as expiring soon")
	}
	b.shots("01-keys", narrow)
	b.do("next page", chromedp.Click(chromedp.ID("next-page")), chromedp.WaitVisible(chromedp.ID("first-page")))
	if n := b.count("#keys tbody tr, #ended-keys tbody tr"); n != 11 {
		t.Fatalf("the second page shows %d keys, want 11", n)
	}
	b.do("search", chromedp.Navigate(base+"/console/developers"), chromedp.WaitVisible(chromedp.ID("keys-q")),
		chromedp.SendKeys(chromedp.ID("keys-q"), "billing"),
		chromedp.Submit(chromedp.ID("keys-q")),
		// The unfiltered page may list billing too: wait for it to go.
		chromedp.WaitNotPresent(chromedp.CSS(`#keys tbody tr:nth-child(2)`)),
		chromedp.WaitVisible(chromedp.CSS(`#keys tr[data-key-id="`+billing.Key.ID+`"]`)))
	if n := b.count("#keys tbody tr"); n != 1 {
		t.Fatalf("search for billing: %d rows", n)
	}
	b.do("search by prefix", chromedp.Navigate(base+"/console/developers?q="+billing.Key.Prefix[:6]),
		chromedp.WaitVisible(chromedp.CSS(`#keys tr[data-key-id="`+billing.Key.ID+`"]`)))
	b.do("filter revoked", chromedp.Navigate(base+"/console/developers"), chromedp.WaitVisible(chromedp.ID("keys-status")),
		chromedp.SetValue(chromedp.ID("keys-status"), "revoked"),
		chromedp.Submit(chromedp.ID("keys-q")),
		chromedp.WaitReady(chromedp.CSS(`#keys-status option[value=revoked][selected]`)))
	if n, badges := b.count("#keys tbody tr, #ended-keys tbody tr"), b.count("#ended-keys .badge-revoked"); n != 9 || badges != 9 {
		t.Fatalf("revoked filter: %d rows, %d revoked", n, badges)
	}
	b.shots("02-keys-revoked", narrow)
}

// browserKeyForm creates a key: the agent picker is a search, a scope
// ticked under a preset flips it to Custom, and an error marks its field.
func browserKeyForm(t *testing.T, f *fixture, b *tab, a domain.Account, agents []domain.Agent, narrow func(string)) domain.APIKey {
	t.Helper()
	ctx, base := context.Background(), b.base
	b.do("new key", chromedp.Navigate(base+"/console/developers/keys/new"), chromedp.WaitVisible(chromedp.ID("advanced-toggle")),
		chromedp.Click(chromedp.ID("advanced-toggle")), chromedp.WaitVisible(chromedp.ID("agent-q")))
	if n := b.count(`#agent-results input[name=agent]`); n != 50 {
		t.Fatalf("the agent picker lists %d agents, want a page of 50", n)
	}
	b.do("fill", chromedp.SendKeys(chromedp.ID("key-name"), "Warehouse <export>"),
		chromedp.SendKeys(chromedp.ID("agent-q"), "Agent 06"),
		chromedp.Click(chromedp.ID("search-agents")),
		chromedp.WaitVisible(chromedp.CSS(`#agent-results input[value="`+agents[65].ID+`"]`)))
	if n := b.count(`#agent-results input[name=agent]`); n != 10 {
		t.Fatalf("search for Agent 06: %d agents", n)
	}
	b.do("pick", chromedp.Click(chromedp.CSS(`#agent-results input[value="`+agents[65].ID+`"]`)),
		chromedp.Click(chromedp.ID("preset-aiagent-query")),
		chromedp.Click(chromedp.CSS(`input[name=scope][value="webhooks:manage"]`)))
	if c := b.eval("custom", `String(document.getElementById('preset-custom').checked)`); c != "true" {
		t.Fatal("ticking a scope under a preset left the preset chosen")
	}
	if c := b.eval("preset scopes", `String(document.querySelector('input[name=scope][value="aiagents:query"]').checked)`); c != "true" {
		t.Fatal("the preset's own scopes were not ticked when the form went Custom")
	}
	if n := b.count("#access-table tr.reserved .badge-reserved"); n != 3 {
		t.Fatalf("%d resources marked reserved, want 3 (staff, helpdesk, settings)", n)
	}
	b.do("past date", chromedp.SetValue(chromedp.ID("expiry"), "custom"),
		chromedp.SetValue(chromedp.ID("expires-at"), "2001-01-01T00:00"),
		chromedp.Click(chromedp.ID("create-key")),
		chromedp.WaitVisible(chromedp.ID("expires_at-error")))
	if inv := b.eval("aria-invalid", `document.getElementById('expires-at').getAttribute('aria-invalid')`); inv != "true" {
		t.Fatalf("the faulty field is not marked: %q", inv)
	}
	if c := b.eval("kept", `String(document.querySelector('input[name=agent][value="`+agents[65].ID+`"]').checked)`); c != "true" {
		t.Fatal("the chosen agent was lost with the error")
	}
	b.shots("03-key-form-error", narrow)
	b.do("create", chromedp.SetValue(chromedp.ID("expiry"), "never"),
		chromedp.Click(chromedp.ID("create-key")), chromedp.WaitVisible(chromedp.ID("credential")))
	cred, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.ID("credential")))
	if err != nil {
		t.Fatal(err)
	}
	f.secrets = append(f.secrets, strings.TrimSpace(cred))
	page, _, err := f.st.KeyPage(ctx, store.KeyPageQuery{AccountID: a.ID, Search: "Warehouse", Now: f.clock.Now(), Limit: 5})
	if err != nil || len(page) != 1 {
		t.Fatalf("created key: %v %d", err, len(page))
	}
	made := page[0]
	if strings.Join(scopeStrings(made.Scopes), ",") != "aiagents:read,aiagents:query,webhooks:manage" || len(made.AgentIDs) != 1 || made.AgentIDs[0] != agents[65].ID {
		t.Fatalf("created key: %+v", made)
	}
	return made
}

// browserEditAndRotate edits key made (a name of nothing visible is
// refused beside the field), then rotates it: the old key stops working
// in 24 hours.
func browserEditAndRotate(t *testing.T, f *fixture, b *tab, a domain.Account, made domain.APIKey, narrow func(string)) {
	t.Helper()
	ctx, base := context.Background(), b.base
	b.do("edit", chromedp.Navigate(base+"/console/developers/keys/"+made.ID), chromedp.WaitVisible(chromedp.ID("edit")),
		chromedp.Click(chromedp.ID("edit")), chromedp.WaitVisible(chromedp.ID("save-key")),
		chromedp.SetValue(chromedp.ID("key-name"), "\u200b"),
		chromedp.Click(chromedp.ID("save-key")), chromedp.WaitVisible(chromedp.ID("name-error")))
	b.shots("04-edit-error", narrow)
	b.do("edit again", chromedp.SetValue(chromedp.ID("key-name"), "Warehouse export"),
		chromedp.SetValue(chromedp.ID("key-description"), "Moved to the new warehouse"),
		chromedp.Click(chromedp.ID("save-key")), chromedp.WaitVisible(chromedp.ID("key-events")))
	if got, _ := f.keys.Get(ctx, a.ID, made.ID); got.Name != "Warehouse export" || got.Description != "Moved to the new warehouse" {
		t.Fatalf("edited key: %q %q", got.Name, got.Description)
	}

	// Rotate it; the old key stops working in 24 hours.
	b.do("rotate form", chromedp.Click(chromedp.ID("rotate")), chromedp.WaitVisible(chromedp.ID("confirm-rotate")))
	b.shots("05-rotate-form", narrow)
	b.do("rotate", chromedp.Click(chromedp.ID("old-expires-24h")), chromedp.Click(chromedp.ID("confirm-rotate")),
		chromedp.WaitVisible(chromedp.ID("rotation")))
	rotated, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.ID("credential")))
	if err != nil {
		t.Fatal(err)
	}
	f.secrets = append(f.secrets, strings.TrimSpace(rotated))
	old, _ := f.keys.Get(ctx, a.ID, made.ID)
	if old.ExpiresAt == nil || !old.ExpiresAt.Equal(f.clock.Now().UTC().Truncate(time.Millisecond).Add(24*time.Hour)) {
		t.Fatalf("old key expires %v, want in 24 hours", old.ExpiresAt)
	}
	b.shots("06-rotated", narrow)
	b.do("history", chromedp.Navigate(base+"/console/developers/keys/"+made.ID), chromedp.WaitVisible(chromedp.ID("key-events")))
	if n := b.count(`#key-events a[href^="/console/developers/keys/key_"]`); n != 1 {
		t.Fatalf("the history links the new key %d times", n)
	}
	if strings.Contains(b.eval("history", `document.getElementById('key-events').textContent`), "key_") {
		t.Fatal("the history shows a raw key id")
	}
	b.shots("07-key", narrow)
}
