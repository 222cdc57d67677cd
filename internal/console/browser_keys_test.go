package console_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// keysSeed is an account in use: a busy key with some errors over the
// last hours, a quiet one, one revoked and still called, one expiring
// soon.
type keysSeed struct {
	a              domain.Account
	owner          domain.User
	busy, revoked  keys.Created
	soon           keys.Created
	calledAfterEnd int
}

func seedKeys(t *testing.T, f *fixture) keysSeed {
	t.Helper()
	ctx := context.Background()
	a, _ := f.account("Acme Widgets")
	// The fixture's Owner's address holds the name's space, which an
	// email field refuses.
	owner := f.user(a, "owner@acme.example", domain.RoleOwner)
	for i := range 3 {
		f.agent(a, fmt.Sprintf("Agent %d", i+1))
	}
	s := keysSeed{a: a, owner: owner}
	mk := func(name string, scopes []domain.Scope, expires *time.Time) keys.Created {
		k, err := f.keys.Create(ctx, keys.Actor{User: &owner}, keys.CreateParams{AccountID: a.ID, Name: name, Scopes: scopes, ExpiresAt: expires})
		if err != nil {
			t.Fatal(err)
		}
		f.secrets = append(f.secrets, k.Credential)
		return k
	}
	s.busy = mk("Billing sync (production)", domain.Presets[1].Scopes, nil)
	mk("Helpdesk widget", domain.Presets[0].Scopes, nil)
	in20 := f.clock.Now().Add(20 * 24 * time.Hour)
	s.soon = mk("Nightly warehouse export", domain.Presets[2].Scopes, &in20)
	s.revoked = mk("Old integration", domain.Presets[1].Scopes, nil)
	// The API records its requests at the wall clock's time, not the
	// fixture's: the busy key's earlier hours are written as counts.
	for range 6 {
		callAPI(t, f.srv.URL+"/v1/me", s.busy.Credential, 200)
	}
	callAPI(t, f.srv.URL+"/v1/ai-agents/agt_nope", s.busy.Credential, 404)
	callAPI(t, f.srv.URL+"/v1/me", s.revoked.Credential, 200)
	if err := f.keys.Revoke(ctx, keys.Actor{User: &owner}, a.ID, s.revoked.Key.ID); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		callAPI(t, f.srv.URL+"/v1/me", s.revoked.Credential, 401)
		s.calledAfterEnd++
	}
	var counts []store.UsageCount
	for h := 1; h <= 12; h++ {
		m := f.clock.Now().Add(-time.Duration(h) * time.Hour).Truncate(time.Minute)
		counts = append(counts, store.UsageCount{AccountID: a.ID, KeyID: s.busy.Key.ID, Minute: m, Class: requestlog.Class2xx, Count: int64(20 + 7*(h%5))})
		if h%4 == 0 {
			counts = append(counts, store.UsageCount{AccountID: a.ID, KeyID: s.busy.Key.ID, Minute: m, Class: requestlog.Class5xx, Count: 2})
		}
	}
	if err := f.st.WriteUsage(ctx, nil, counts); err != nil {
		t.Fatal(err)
	}
	if err := f.usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestBrowserKeysFormsAccount drives issue 43's keys, forms and account
// parts in headless Chromium at 1400 and 400 pixels: the keys list (row
// menu open, sparklines, the revoked key still called), a key's page, the
// key form (its access table follows the preset; at 400 pixels it is well
// under the 3,594 pixels it was), the edit form, the reveal page's curl
// line, Overview and the account's page with a rename. Screenshots go to
// $AGENTAPI_ARTIFACTS_DIR as keys43-<page>-<width>.png.
func TestBrowserKeysFormsAccount(t *testing.T) {
	f := newFixture(t)
	s := seedKeys(t, f)
	b := newTab(t, f.srv.URL, 1400, 200*time.Second)
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
			b.shot(fmt.Sprintf("keys43-%s-%d", name, width))
		}
		b.do("viewport", chromedp.EmulateViewport(1400, 900))
	}
	b.signIn(s.owner.Email, testPassword, "new-key")
	browserKeysListPage(t, b, s, look)
	browserKeyFormPage(t, b, s, look)
	browserAccountPages(t, b, s, look)
}

func browserKeysListPage(t *testing.T, b *tab, s keysSeed, look func(string)) {
	t.Helper()
	b.do("keys", chromedp.Navigate(b.base+"/console/developers"), chromedp.WaitVisible(chromedp.ID("still-called")))
	if n := b.count("#keys tbody tr"); n != 3 {
		t.Errorf("%d active keys listed, want 3", n)
	}
	if n := b.count("#ended-keys tbody tr"); n != 1 {
		t.Errorf("%d ended keys listed apart, want 1", n)
	}
	if got := b.eval("warning", `document.querySelector('#still-called .called-count').textContent`); got != strconv.Itoa(s.calledAfterEnd) {
		t.Errorf("the warning counts %s requests after revocation, want %d", got, s.calledAfterEnd)
	}
	busy := `#keys tr[data-key-id="` + s.busy.Key.ID + `"]`
	if n := b.count(busy + ` svg.spark rect`); n < 6 {
		t.Errorf("the busy key's sparkline draws %d bars, want at least 6", n)
	}
	if w := b.eval("sparkline", `String(document.querySelector('`+busy+` svg.spark').getBoundingClientRect().width)`); w != "96" {
		t.Errorf("the sparkline is %s pixels wide", w)
	}
	b.do("row menu", chromedp.Click(chromedp.CSS(busy+` .rowmenu summary`)), chromedp.WaitVisible(chromedp.CSS(busy+` .rowmenu .menu`)))
	if items := b.eval("menu", `Array.from(document.querySelectorAll('`+busy+` .rowmenu .menu a')).map(a => a.textContent).join(',')`); items != "Edit,Rotate,Revoke,Logs" {
		t.Errorf("the row menu offers %q", items)
	}
	// The open menu, in the row's flow (no clipping by the table's
	// scrolling box), makes its row taller: shot apart from the checks.
	for _, width := range []int64{1400, 400} {
		b.do("viewport", chromedp.EmulateViewport(width, 900))
		b.shot(fmt.Sprintf("keys43-list-menu-%d", width))
	}
	b.do("close menu", chromedp.EmulateViewport(1400, 900), chromedp.Click(chromedp.CSS(busy+` .rowmenu summary`)))
	look("list")
	b.do("menu logs", chromedp.Click(chromedp.CSS(busy+` .rowmenu summary`)), chromedp.WaitVisible(chromedp.CSS(busy+` .rowmenu .menu`)),
		chromedp.Click(chromedp.CSS(busy+` .rowmenu .menu a:last-child`)), chromedp.WaitVisible(chromedp.ID("logs")))
	if u := b.eval("logs address", `location.search`); u != "?key="+s.busy.Key.ID {
		t.Errorf("the menu's Logs opened %q", u)
	}
	b.do("key page", chromedp.Navigate(b.base+"/console/developers/keys/"+s.busy.Key.ID), chromedp.WaitVisible(chromedp.ID("edit")))
	if p := b.eval("preset", `document.querySelector('.preset').textContent`); p != "aiagent-query" {
		t.Errorf("the key page names the preset %q", p)
	}
	look("key")
}

// keyFormHeightJS is the page's height in pixels.
const keyFormHeightJS = `String(Math.round(document.documentElement.scrollHeight))`

func browserKeyFormPage(t *testing.T, b *tab, s keysSeed, look func(string)) {
	t.Helper()
	b.do("new key", chromedp.Navigate(b.base+"/console/developers/keys/new"), chromedp.WaitVisible(chromedp.ID("access-table")))
	ticked := func() string {
		return b.eval("ticked", `Array.from(document.querySelectorAll('#access-table input:checked')).map(i => i.value).join(',')`)
	}
	if got := ticked(); got != "aiagents:read" {
		t.Errorf("the table starts with %q ticked, want aiagents:read", got)
	}
	b.do("full access", chromedp.Click(chromedp.ID("preset-full-access")))
	if n := b.count("#access-table input:checked"); n != len(domain.Scopes) {
		t.Errorf("full-access ticks %d scopes, want %d", n, len(domain.Scopes))
	}
	b.do("query", chromedp.Click(chromedp.ID("preset-aiagent-query")))
	if got := ticked(); got != "aiagents:read,aiagents:query" {
		t.Errorf("aiagent-query ticks %q", got)
	}
	b.do("untick", chromedp.Click(chromedp.CSS(`#access-table input[value="aiagents:read"]`)))
	if c := b.eval("custom", `String(document.getElementById('preset-custom').checked)`); c != "true" {
		t.Error("changing a box under a preset left the preset chosen")
	}
	b.do("back", chromedp.Click(chromedp.ID("preset-aiagent-read")))
	b.do("viewport", chromedp.EmulateViewport(400, 900))
	h, _ := strconv.Atoi(b.eval("height", keyFormHeightJS))
	t.Logf("the key form is %d pixels tall at 400 pixels wide (was 3,594)", h)
	if h > 1800 {
		t.Errorf("the key form is %d pixels tall at 400 pixels, want at most 1,800", h)
	}
	b.do("viewport", chromedp.EmulateViewport(1400, 900))
	look("form")
	b.do("advanced", chromedp.Click(chromedp.ID("advanced-toggle")), chromedp.WaitVisible(chromedp.ID("agent-q")))
	look("form-advanced")
	b.do("create", chromedp.SendKeys(chromedp.ID("key-name"), "Reporting"),
		chromedp.Click(chromedp.ID("create-key")), chromedp.WaitVisible(chromedp.ID("curl")))
	curl := b.text("curl", "curl")
	if !strings.HasPrefix(curl, `curl -H "Authorization: Bearer agk_live_`) || !strings.HasSuffix(curl, b.base+"/v1/me") {
		t.Errorf("curl line %q", curl)
	}
	look("created")
	b.do("edit", chromedp.Navigate(b.base+"/console/developers/keys/"+s.soon.Key.ID+"/edit"), chromedp.WaitVisible(chromedp.ID("save-key")))
	if o := b.eval("expiries", `Array.from(document.querySelectorAll('#expiry option')).map(o => o.value).join(',')`); o != "keep,7,custom" {
		t.Errorf("a key expiring in 20 days is offered the expiries %q", o)
	}
	if got := ticked(); got != strings.Join(scopeStrings(domain.Scopes), ",") {
		t.Errorf("the edit form of a full-access key ticks %q", got)
	}
	look("edit")
}

func browserAccountPages(t *testing.T, b *tab, s keysSeed, look func(string)) {
	t.Helper()
	b.do("overview", chromedp.Navigate(b.base+"/console/overview"), chromedp.WaitVisible(chromedp.ID("overview-account")))
	if got := b.text("header", "account-name"); got != "Acme Widgets" {
		t.Errorf("the header names the account %q", got)
	}
	if got := b.text("ai answers", "overview-ai-answers"); !strings.HasPrefix(got, "AI answers: off") {
		t.Errorf("Overview says %q", got)
	}
	look("overview")
	b.do("account", chromedp.Navigate(b.base+"/console/account"), chromedp.WaitVisible(chromedp.ID("rename")),
		chromedp.SetValue(chromedp.ID("account-name-input"), "Acme Robotics"),
		chromedp.Click(chromedp.ID("rename")), chromedp.WaitVisible(chromedp.CSS(".notice-ok")))
	if got := b.text("header", "account-name"); got != "Acme Robotics" {
		t.Errorf("after the rename the header names the account %q", got)
	}
	look("account")
}
