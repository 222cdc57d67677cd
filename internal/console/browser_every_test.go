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
)

// overflowJS names what sticks out of the window, or of its card or
// fieldset, sideways (outside the tables' own scrolling boxes), or says
// "ok".
const overflowJS = `(function () {
	var w = document.documentElement.clientWidth, bad = [];
	document.querySelectorAll('body *').forEach(function (e) {
		var r = e.getBoundingClientRect(), box = e.parentElement.closest('.card, fieldset');
		var right = box ? Math.min(w, box.getBoundingClientRect().right) : w;
		if (r.width > 0 && r.right > right + 1 && !e.closest('.tablewrap') && !e.closest('.sr-only')) {
			bad.push(e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className ? '.' + String(e.className).split(' ')[0] : '') + ' to ' + Math.round(r.right));
		}
	});
	if (document.documentElement.scrollWidth > w + 1) { bad.unshift('page scrolls to ' + document.documentElement.scrollWidth); }
	return bad.length ? bad.slice(0, 6).join(', ') : 'ok';
})()`

// narrowTablesJS names an event table (audit trail, a key's history,
// recent activity) that scrolls sideways, a user row over 72 pixels tall,
// and a key row taller than its name and scopes need, or says "ok": at 400
// pixels each event is a block of its own, its detail wrapped under it,
// and the cells of the users and keys tables that are out of sight in
// their scrolling box stay one line rather than stretch the row.
const narrowTablesJS = `(function () {
	var bad = [];
	document.querySelectorAll('.eventtable').forEach(function (t) {
		var w = t.closest('.tablewrap');
		if (w.scrollWidth > w.clientWidth + 1) { bad.push('#' + t.id + ' scrolls to ' + w.scrollWidth + ' in ' + w.clientWidth); }
	});
	document.querySelectorAll('#users tbody tr').forEach(function (r) {
		var h = r.getBoundingClientRect().height;
		if (h > 72) { bad.push('a user row is ' + Math.round(h) + ' pixels tall'); }
	});
	document.querySelectorAll('#keys tbody tr').forEach(function (r) {
		var need = 0;
		r.querySelectorAll('td.keyname, td.scopes').forEach(function (c) {
			var k = c.children;
			if (k.length) { need = Math.max(need, k[k.length - 1].getBoundingClientRect().bottom - k[0].getBoundingClientRect().top); }
		});
		var h = r.getBoundingClientRect().height;
		if (h > need + 32) { bad.push('a key row is ' + Math.round(h) + ' pixels tall for ' + Math.round(need) + ' of name and scopes'); }
	});
	return bad.length ? bad.slice(0, 6).join(', ') : 'ok';
})()`

// placeholdersJS names a visible field whose placeholder does not fit in
// it, or says "ok": at 400 pixels a search box keeps its whole hint. The
// hint is measured as a value (with a search box's clear button beside it).
const placeholdersJS = `(function () {
	var bad = [];
	document.querySelectorAll('input[placeholder]').forEach(function (i) {
		var v = i.value;
		i.value = i.placeholder;
		if (i.offsetParent && i.scrollWidth > i.clientWidth + 1) { bad.push('#' + i.id + ' shows ' + i.clientWidth + ' of the ' + i.scrollWidth + ' pixels of "' + i.placeholder + '"'); }
		i.value = v;
	});
	return bad.length ? bad.join(', ') : 'ok';
})()`

// TestBrowserEveryPageAt400 opens every keys, logs, webhooks, agents, users and
// account page of the console in headless Chromium and looks at each at 1400 and
// at 400 pixels wide: nothing may stick out sideways at 400 (a table may
// scroll in its own box, but not an event table: narrowTablesJS), and every
// field's hint fits in it (placeholdersJS).
// Screenshots go to $AGENTAPI_ARTIFACTS_DIR as every-<page>-<width>.png.
func TestBrowserEveryPageAt400(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	var agents []domain.Agent
	for i := range 55 {
		agents = append(agents, f.agent(a, fmt.Sprintf("Agent %d", i+1)))
	}
	ag := f.agent(a, "Support bot with a rather long name for a narrow screen")
	for i := range 3 {
		f.user(a, fmt.Sprintf("user%02d@acme.example", i), domain.RoleAgent)
	}
	k := f.key(a, owner, "Billing sync (production)")
	soon := f.clock.Now().Add(5 * 24 * time.Hour)
	if _, err := f.keys.SetAccess(context.Background(), domainActor(owner), a.ID, k.Key.ID, keys.Access{
		Scopes: domain.Presets[1].Scopes, AgentIDs: []string{agents[1].ID, agents[9].ID}, ExpiresAt: &soon}); err != nil {
		t.Fatal(err)
	}
	key := "/console/developers/keys/" + k.Key.ID
	b := newTab(t, f.srv.URL, 1400, 200*time.Second)
	b.prefix = "every"
	look := func(name string) {
		t.Helper()
		for _, width := range []int64{1400, 400} {
			b.do("viewport", chromedp.EmulateViewport(width, 900))
			if width == 400 {
				for _, js := range []string{overflowJS, narrowTablesJS, placeholdersJS} {
					if got := b.eval(name+" at 400", js); got != "ok" {
						t.Errorf("%s at 400 pixels: %s", name, got)
					}
				}
			}
			b.shot(fmt.Sprintf("every-%s-%d", name, width))
		}
		b.do("viewport", chromedp.EmulateViewport(1400, 900))
	}
	visit := func(name, path string, ready chromedp.ID) {
		t.Helper()
		b.do(name, chromedp.Navigate(f.srv.URL+path), chromedp.WaitVisible(ready))
		look(name)
	}
	visit("signin", "/console/signin", "signin")
	b.signIn(owner.Email, testPassword, "new-key")
	visit("keys", "/console/developers", "new-key")
	visit("newkey", "/console/developers/keys/new", "create-key")
	b.do("create", chromedp.SendKeys(chromedp.ID("key-name"), "Nightly warehouse export"),
		chromedp.Click(chromedp.ID("create-key")), chromedp.WaitVisible(chromedp.ID("credential")))
	look("created")
	visit("key", key, "edit")
	visit("editkey", key+"/edit", "save-key")
	visit("rotate", key+"/rotate", "rotate-form")
	visit("revoke", key+"/revoke", "confirm-revoke")
	visit("audit", "/console/developers/audit", "audit")
	seedUsage(t, f, a.ID, k.Key.ID, 1, 8)
	visit("logs", "/console/developers/logs", "logs")
	visit("logdetail", "/console/developers/logs/"+b.eval("a log", `document.querySelector('#logs tr[data-request-id]').getAttribute('data-request-id')`), "log-detail")
	visit("logs-filtered", "/console/developers/logs?range=1h&status=4xx&key="+k.Key.Prefix, "logs")
	visit("logs-errors", "/console/developers/logs?status=abc&route=%2Fv2&from=x&range=custom", "filter-errors")
	visit("health", "/console/developers/health", "health")
	visit("policy", "/console/developers/policy", "policy-form")
	visit("agents", "/console/agents", "agent-name")
	b.do("next agents", chromedp.Click(chromedp.ID("next-page")), chromedp.WaitVisible(chromedp.ID("prev-page")))
	look("agents-2")
	visit("agent", "/console/agents/"+ag.ID, "instructions")
	visit("users", "/console/users", "invite")
	b.do("invite", chromedp.SendKeys(chromedp.ID("invite-email"), "new.colleague@acme.example"),
		chromedp.Click(chromedp.ID("invite")), chromedp.WaitVisible(chromedp.ID("done")))
	look("invited")
	visit("password", "/console/password", "save-password")
	visit("notifications", "/console/notifications", "email-notices")
	visit("account", "/console/account", "rename")
	visit("error", "/console/no-such-page", "nav-developers")
	// Webhooks last: seedWebhooks moves the clock on 5 days.
	visit("webhooks-empty", "/console/developers/webhooks", "first-endpoint")
	ep := seedWebhooks(f, a, owner)
	b.signIn(owner.Email, testPassword, "nav-webhooks") // the session ran out meanwhile
	hook := "/console/developers/webhooks/" + ep.ID
	visit("webhooks", "/console/developers/webhooks", "endpoints")
	visit("webhook-new", "/console/developers/webhooks/new", "save-endpoint")
	b.do("add endpoint", chromedp.SendKeys(chromedp.ID("endpoint-url"), "https://ops.example.com/agentapi"),
		chromedp.Click(chromedp.ID("save-endpoint")), chromedp.WaitVisible(chromedp.ID("signing-secret")))
	f.secrets = append(f.secrets, b.text("secret", "signing-secret"))
	look("webhook-secret")
	visit("webhook", hook, "deliveries")
	visit("webhook-edit", hook+"/edit", "save-endpoint")
	visit("webhook-rotate", hook+"/rotate", "rotate-secret-form")
	visit("webhook-delete", hook+"/delete", "confirm-delete")
	visit("audit-webhooks", "/console/developers/audit", "audit")
	if !strings.Contains(b.eval("title", "document.title"), "agentapi") {
		t.Error("no title")
	}
}
