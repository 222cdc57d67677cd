package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// between is the part of body from the element with id to the end of its
// table or section (the next closing tag named end).
func between(t *testing.T, body, id, end string) string {
	t.Helper()
	i := strings.Index(body, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no element %q on the page:\n%s", id, body)
	}
	j := strings.Index(body[i:], end)
	if j < 0 {
		t.Fatalf("element %q has no %s", id, end)
	}
	return body[i : i+j]
}

// rowOf is the keys list's row of key id.
func rowOf(t *testing.T, body, id string) string {
	t.Helper()
	i := strings.Index(body, `<tr data-key-id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no row of %s", id)
	}
	return body[i : i+strings.Index(body[i:], "</tr>")]
}

// TestKeysListControlCentre: the keys list shows each key's last 24 hours
// (a sparkline, its requests and error share), a menu of its actions,
// active keys apart from revoked ones, and a warning naming a revoked key
// that is still being called, with how often, its last attempt and the
// address it came from: all from what the usage recorder keeps (the
// refused requests carry the key's id).
func TestKeysListControlCentre(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	live := f.key(a, owner, "live key")
	gone := f.key(a, owner, "gone key")
	quiet := f.key(a, owner, "quiet revoked key")
	useThenRevoke(t, f, a, owner, live, gone, quiet)
	body := f.signedIn(owner).get("/console/developers").body

	active, ended := between(t, body, "keys", "</table>"), between(t, body, "ended-keys", "</table>")
	if !strings.Contains(active, live.Key.ID) || strings.Contains(active, gone.Key.ID) || strings.Contains(active, quiet.Key.ID) {
		t.Error("the active keys' table is not the active keys alone")
	}
	if !strings.Contains(ended, gone.Key.ID) || !strings.Contains(ended, quiet.Key.ID) || strings.Contains(ended, live.Key.ID) {
		t.Error("the revoked keys are not apart")
	}
	checkLiveRow(t, rowOf(t, body, live.Key.ID), live.Key.ID)
	if r := rowOf(t, body, gone.Key.ID); strings.Contains(r, "/rotate\"") || strings.Contains(r, "/revoke\"") || !strings.Contains(r, "still called") {
		t.Errorf("the revoked key's row offers rotate or revoke, or is not marked:\n%s", r)
	}
	warn := between(t, body, "still-called", "</div>")
	gw := warn[strings.Index(warn, `data-key-id="`+gone.Key.ID+`"`):]
	if !strings.Contains(gw, `<span class="called-count">4</span> requests since it was revoked`) ||
		!strings.Contains(gw, `<code class="called-client">127.0.0.1</code>`) || !strings.Contains(gw, "<time datetime=") {
		t.Errorf("the warning lacks the count, the last attempt or its address:\n%s", warn)
	}
	if strings.Contains(warn, quiet.Key.ID) {
		t.Error("a revoked key nobody calls is warned about")
	}
}

// useThenRevoke calls the API with live (3 answered, 1 not found) and
// gone (1 answered), revokes gone and quiet, then calls with gone 4 times
// (refused), and writes the usage.
func useThenRevoke(t *testing.T, f *fixture, a domain.Account, owner domain.User, live, gone, quiet keys.Created) {
	t.Helper()
	for _, c := range []struct {
		cred, path string
		status     int
	}{{live.Credential, "/v1/me", 200}, {live.Credential, "/v1/me", 200}, {live.Credential, "/v1/me", 200},
		{live.Credential, "/v1/ai-agents/agt_nope", 404}, {gone.Credential, "/v1/me", 200}} {
		callAPI(t, f.srv.URL+c.path, c.cred, c.status)
	}
	ctx := context.Background()
	for _, k := range []keys.Created{gone, quiet} {
		if err := f.keys.Revoke(ctx, domainActor(owner), a.ID, k.Key.ID); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Advance(2 * time.Minute)
	for range 4 {
		callAPI(t, f.srv.URL+"/v1/me", gone.Credential, 401)
	}
	if err := f.usage.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// checkLiveRow: the live key's row shows its 4 requests, 25 % errors, a
// sparkline with one error bar, and its menu.
func checkLiveRow(t *testing.T, row, id string) {
	t.Helper()
	for _, want := range []string{
		`<span class="requests24h">4</span> in 24 h`, `<span class="error-share has-errors">25.0 %</span> errors`,
		`<svg class="spark"`, `<details class="rowmenu">`,
		`href="/console/developers/keys/` + id + `/edit"`, `href="/console/developers/keys/` + id + `/rotate"`,
		`href="/console/developers/keys/` + id + `/revoke"`, `href="/console/developers/logs?key=` + id + `"`,
	} {
		if !strings.Contains(row, want) {
			t.Errorf("the live key's row lacks %q:\n%s", want, row)
		}
	}
	if n := strings.Count(row, `fill="#D55E00"`); n != 1 {
		t.Errorf("the live key's sparkline draws %d error bars, want 1", n)
	}
}

// TestKeyFormAccessTable: the key form shows the scopes as a resource ×
// access table holding the chosen preset's scopes, also when the server
// renders the form again (no JavaScript); the advanced options are folded
// unless something in them is set.
func TestKeyFormAccessTable(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	ag := f.agent(a, "Support")
	b := f.signedIn(owner)
	form := b.get("/console/developers/keys/new").body
	table := between(t, form, "access-table", "</table>")
	for _, res := range []string{"aiagents", "webhooks", "staff", "helpdesk", "settings"} {
		if !strings.Contains(table, `<tr data-resource="`+res+`"`) {
			t.Errorf("no row for %s", res)
		}
	}
	checked := func(body, scope string) bool {
		return regexp.MustCompile(`value="` + regexp.QuoteMeta(scope) + `"[^>]*checked`).MatchString(body)
	}
	if !checked(table, "aiagents:read") || checked(table, "aiagents:query") {
		t.Error("the table does not hold the default preset's scopes (aiagents:read only)")
	}
	if !strings.Contains(form, `<details class="advanced" id="advanced">`) {
		t.Error("the advanced options are not folded")
	}
	again := b.post("/console/developers/keys/new", "/console/developers/keys",
		url.Values{"op": {"search-agents"}, "name": {"x"}, "preset": {"full-access"}, "agent": {ag.ID}})
	wantStatus(t, "search", again, http.StatusOK)
	for _, sc := range domain.Scopes {
		if !checked(again.body, string(sc)) {
			t.Errorf("full-access re-rendered without %s ticked", sc)
		}
	}
	if !strings.Contains(again.body, `<details class="advanced" id="advanced" open>`) {
		t.Error("the advanced options stay folded with an agent chosen in them")
	}
}

// TestEditOffersOnlyAllowedExpiries: an edit only brings an expiry
// earlier, so the form offers no "In 1 year" for a key expiring in 30
// days (it was offered, then refused), and offers it for a key that never
// expires.
func TestEditOffersOnlyAllowedExpiries(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	in30 := f.clock.Now().Add(30 * 24 * time.Hour)
	soon, err := f.keys.Create(context.Background(), domainActor(owner), keysParams(a.ID, "soon", &in30))
	if err != nil {
		t.Fatal(err)
	}
	never := f.key(a, owner, "never")
	b := f.signedIn(owner)
	opts := func(id string) string {
		return between(t, b.get("/console/developers/keys/"+id+"/edit").body, "expiry", "</select>")
	}
	o := opts(soon.Key.ID)
	if strings.Contains(o, `value="365"`) || strings.Contains(o, `value="90"`) || !strings.Contains(o, `value="7"`) || !strings.Contains(o, `value="custom"`) {
		t.Errorf("a key expiring in 30 days is offered:\n%s", o)
	}
	if o := opts(never.Key.ID); !strings.Contains(o, `value="365"`) {
		t.Errorf("a key that never expires is not offered a year:\n%s", o)
	}
}

// TestRevealShowsCurl: the page that shows a new key once gives a curl
// line that calls GET /v1/me with it on this server.
func TestRevealShowsCurl(t *testing.T) {
	f := newFixture(t)
	_, owner := f.account("Acme")
	b := f.signedIn(owner)
	shown, cred := b.created("/console/developers/keys/new", "/console/developers/keys",
		url.Values{"name": {"ci"}, "preset": {"aiagent-read"}, "env": {"live"}, "expiry": {"never"}})
	want := `curl -H "Authorization: Bearer ` + cred + `" ` + f.srv.URL + `/v1/me`
	if !strings.Contains(shown.body, want) {
		t.Fatalf("no %q on the reveal page:\n%s", want, shown.body)
	}
}

// TestAccountNameAndRename: the account's name heads every console page
// and Overview, which says whether AI answers are on; an Owner renames
// the account (audited), a bad name is refused beside the field, and an
// Admin sees the account but cannot rename it.
func TestAccountNameAndRename(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme Widgets")
	admin := f.user(a, "admin@acme.example", domain.RoleAdmin)
	b := f.signedIn(owner)
	for _, path := range []string{"/console/developers", "/console/agents", "/console/overview"} {
		if p := b.get(path); !strings.Contains(p.body, `id="account-name" title="Account"><bdi>Acme Widgets</bdi>`) {
			t.Errorf("%s: no account name in the header", path)
		}
	}
	ov := b.get("/console/overview").body
	if !strings.Contains(between(t, ov, "overview-account", "</p>"), "Acme Widgets") || !strings.Contains(between(t, ov, "overview-ai-answers", "</p>"), ">off</span>") {
		t.Errorf("Overview lacks the name or AI answers off:\n%s", ov)
	}
	if err := f.st.SetAccountFeature(context.Background(), a.ID, domain.FeatureAIAnswers, true); err != nil {
		t.Fatal(err)
	}
	if ov := b.get("/console/overview").body; !strings.Contains(between(t, ov, "overview-ai-answers", "</p>"), ">on</span>") {
		t.Error("Overview does not say AI answers are on")
	}

	bad := b.post("/console/account", "/console/account", url.Values{"name": {" \t "}})
	wantStatus(t, "blank name", bad, http.StatusUnprocessableEntity)
	if !strings.Contains(bad.body, `id="name-error"`) {
		t.Errorf("no field error:\n%s", bad.body)
	}
	p := b.post("/console/account", "/console/account", url.Values{"name": {"Acme Robotics"}})
	wantRedirect(t, "rename", p, "/console/account?done=account-renamed")
	if got, _ := f.st.GetAccount(context.Background(), a.ID); got.Name != "Acme Robotics" {
		t.Fatalf("name %q", got.Name)
	}
	items, _, err := f.st.AuditPage(context.Background(), store.AuditPageQuery{AccountID: a.ID, Limit: 5})
	if err != nil || len(items) == 0 || items[0].Action != domain.AuditAccountRenamed || items[0].Actor != owner.Email ||
		items[0].Detail != `"Acme Widgets" → "Acme Robotics"` {
		t.Fatalf("audit: %v %+v", err, items)
	}
	if p := b.get("/console/developers"); !strings.Contains(p.body, "<bdi>Acme Robotics</bdi>") {
		t.Error("the header keeps the old name")
	}

	ab := f.signedIn(admin)
	ap := ab.get("/console/account")
	wantStatus(t, "admin account page", ap, http.StatusOK)
	if strings.Contains(ap.body, `id="rename-account"`) || !strings.Contains(ap.body, "Acme Robotics") {
		t.Error("an Admin is offered the rename, or does not see the name")
	}
	if p := ab.post("/console/account", "/console/account", url.Values{"name": {"Hijacked"}}); p.status != http.StatusNotFound {
		t.Errorf("an Admin's rename: %d", p.status)
	}
	if got, _ := f.st.GetAccount(context.Background(), a.ID); got.Name != "Acme Robotics" {
		t.Fatalf("an Admin renamed the account to %q", got.Name)
	}
}

// TestStillCalledExpiredKey: an expired key called after its expiry is
// warned about too, with its count since the expiry, the last attempt
// and its address; its calls before the expiry do not count.
func TestStillCalledExpiredKey(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	soon := f.clock.Now().Add(time.Minute)
	k, err := f.keys.Create(context.Background(), domainActor(owner), keysParams(a.ID, "short-lived", &soon))
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(10 * time.Minute)
	// The recorder's logs and counts, as it writes them (the API stamps
	// requests with the wall clock, not the fixture's).
	before, after := soon.Add(-30*time.Second), soon.Add(3*time.Minute)
	log := func(id string, at time.Time, status int, client string) requestlog.Log {
		return requestlog.Log{ID: id, AccountID: a.ID, KeyID: k.Key.ID, At: at, Method: "GET", Route: "GET /v1/me",
			Path: "/v1/me", Status: status, Client: client}
	}
	logs := []requestlog.Log{log("req_a", before, 200, "192.0.2.1"), log("req_b", after, 401, "198.51.100.7")}
	counts := []store.UsageCount{
		{AccountID: a.ID, KeyID: k.Key.ID, Minute: before.Truncate(time.Minute), Class: requestlog.Class2xx, Count: 5},
		{AccountID: a.ID, KeyID: k.Key.ID, Minute: after.Truncate(time.Minute), Class: requestlog.Class4xx, Count: 3},
	}
	if err := f.st.WriteUsage(context.Background(), logs, counts); err != nil {
		t.Fatal(err)
	}
	warn := between(t, f.signedIn(owner).get("/console/developers").body, "still-called", "</div>")
	if !strings.Contains(warn, `<span class="called-count">3</span> requests since it expired`) ||
		!strings.Contains(warn, `<code class="called-client">198.51.100.7</code>`) || !strings.Contains(warn, formatUTC(after)) {
		t.Errorf("the warning on the expired key:\n%s", warn)
	}
}
