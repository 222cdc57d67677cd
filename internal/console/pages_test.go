package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/console"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// seedMany gives account a n AI agents, n users and n keys (each key
// restricted to one agent, every seventh revoked, every tenth expiring in
// three days), so every list has several pages.
func seedMany(tb testing.TB, st *store.Store, ks *keys.Service, a domain.Account, owner domain.User, now time.Time, n int) []domain.Agent {
	tb.Helper()
	ctx := context.Background()
	agents := make([]domain.Agent, n)
	for i := range agents {
		agents[i] = domain.Agent{ID: domain.NewID(domain.PrefixAgent, now), AccountID: a.ID, Name: fmt.Sprintf("Agent %04d", i),
			Instructions: "Be helpful.", Enabled: i%5 != 0, CreatedAt: now, UpdatedAt: now}
	}
	if err := st.ImportAgents(ctx, agents); err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		if err := st.CreateUser(ctx, domain.User{ID: domain.NewID(domain.PrefixUser, now), AccountID: a.ID,
			Email: fmt.Sprintf("user%04d@acme.example", i), Role: domain.RoleAgent, PasswordHash: testHash(), Active: true, CreatedAt: now}); err != nil {
			tb.Fatal(err)
		}
	}
	soon := now.Add(72 * time.Hour)
	for i := range n {
		p := keys.CreateParams{AccountID: a.ID, Name: fmt.Sprintf("Key %04d", i), Scopes: []domain.Scope{domain.ScopeAgentsRead},
			AgentIDs: []string{agents[i].ID}}
		if i%10 == 0 {
			p.ExpiresAt = &soon
		}
		c, err := ks.Create(ctx, keys.Actor{User: &owner}, p)
		if err != nil {
			tb.Fatal(err)
		}
		if i%7 == 0 {
			if err := ks.Revoke(ctx, keys.Actor{User: &owner}, a.ID, c.Key.ID); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return agents
}

var (
	keyRowRE   = regexp.MustCompile(`<tr data-key-id="(key_[0-9a-z]+)"`)
	nextPageRE = regexp.MustCompile(`href="([^"]+)" rel="next"`)
)

// rowsOf counts the body rows of the table with that id.
func rowsOf(t *testing.T, body, table string) int {
	t.Helper()
	i := strings.Index(body, `id="`+table+`"`)
	if i < 0 {
		t.Fatalf("no table %s", table)
	}
	rest := body[i:]
	rest = rest[strings.Index(rest, "<tbody>"):strings.Index(rest, "</tbody>")]
	return strings.Count(rest, "<tr")
}

// Every console page shows at most 50 rows with 300 keys, agents and users
// in the account; following "Next page" reaches every key exactly once;
// search and the status filter narrow the list; a bad link is a 400.
// checkKeyFilters counts the keys of seedMany's 300 that the Developers
// page's filters and searches find.
func checkKeyFilters(t *testing.T, b *browser) {
	t.Helper()
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/console/developers?status=revoked", 43},
		{"/console/developers?status=active", 50},
		{"/console/developers?q=key+0012", 1},
		{"/console/developers?q=KEY+001", 10},
		{"/console/developers?q=%25", 0}, // LIKE's wildcard is text here
		{"/console/developers?status=expired", 0},
	} {
		p := b.get(tc.path)
		wantStatus(t, tc.path, p, http.StatusOK)
		if n := len(keyRowRE.FindAllString(p.body, -1)); n != tc.want {
			t.Errorf("%s: %d keys, want %d", tc.path, n, tc.want)
		}
	}
	if p := b.get("/console/developers?status=revoked"); strings.Contains(p.body, "badge-active") {
		t.Error("the revoked filter shows an active key")
	}
}

func TestListPagesHoldAtMost50(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	seedMany(t, f.st, f.keys, a, owner, f.clock.Now(), 300)
	b := f.signedIn(owner)

	seen, pages := walkPages(t, b, "/console/developers", keyRowRE)
	if len(seen) != 300 || pages != 6 {
		t.Fatalf("%d keys over %d pages, want 300 over 6", len(seen), pages)
	}
	first := b.get("/console/developers")
	if !strings.Contains(first.body, "expires soon") {
		t.Fatal("no key marked expiring soon")
	}
	checkKeyFilters(t, b)

	for _, tc := range []struct{ path, table string }{
		{"/console/developers/audit", "audit"},
		{"/console/users", "users"},
	} {
		p := b.get(tc.path)
		wantStatus(t, tc.path, p, http.StatusOK)
		if n := rowsOf(t, p.body, tc.table); n != 50 {
			t.Errorf("%s: %d rows, want 50", tc.path, n)
		}
		if !nextPageRE.MatchString(p.body) {
			t.Errorf("%s: no next page", tc.path)
		}
	}
	for _, tc := range []struct {
		path string
		row  *regexp.Regexp
	}{
		{"/console/developers/audit", regexp.MustCompile(`<tr data-event-id="([^"]+)"`)},
		{"/console/users", regexp.MustCompile(`<tr data-user-id="([^"]+)"`)},
	} {
		if seen, _ := walkPages(t, b, tc.path, tc.row); len(seen) < 300 {
			t.Errorf("%s: %d rows over every page", tc.path, len(seen))
		}
	}
	if p := b.get("/console/users?q=user0299"); rowsOf(t, p.body, "users") != 1 {
		t.Error("users search")
	}
	if p := b.get("/console/developers/audit?q=key+0299"); rowsOf(t, p.body, "audit") != 1 {
		t.Error("audit search by key name")
	}
	form := b.get("/console/developers/keys/new")
	if n := strings.Count(form.body, `name="agent" value=`); n != 50 {
		t.Errorf("the key form lists %d agents, want 50", n)
	}
	// The picker's next page continues by name; ticked agents stay ticked.
	agents, _, _ := f.st.AgentPickerPage(context.Background(), a.ID, "", "", 1)
	more := b.post("/console/developers/keys/new", "/console/developers/keys", url.Values{
		"op": {"more-agents"}, "agent_after": {"agent 0049"}, "agent": {agents[0].ID}, "name": {"x"}})
	wantStatus(t, "more agents", more, http.StatusOK)
	if !strings.Contains(more.body, `value="`+agents[0].ID+`" checked`) || !strings.Contains(more.body, "Agent 0050") || strings.Contains(more.body, "Agent 0049<") {
		t.Errorf("the picker's next page:\n%s", more.body)
	}
	if ks, _ := f.keys.List(context.Background(), a.ID); len(ks) != 300 {
		t.Fatal("a picker button created a key")
	}

	for _, path := range []string{"/console/developers?after=nonsense", "/console/developers?status=lost",
		"/console/users?after=1.", "/console/developers/audit?q=" + strings.Repeat("x", 201)} {
		wantStatus(t, path, b.get(path), http.StatusBadRequest)
	}
}

// BenchmarkConsolePages measures each console page with 300 keys, 300 AI
// agents and 300 users on SQLite, over a loopback connection: one
// sub-benchmark (and ms/page) per page.
func BenchmarkConsolePages(b *testing.B) {
	st := storetest.Open(b, store.EngineSQLite)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	a := domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: "Acme", Active: true, CreatedAt: now}
	if err := st.CreateAccount(ctx, a); err != nil {
		b.Fatal(err)
	}
	owner := domain.User{ID: domain.NewID(domain.PrefixUser, now), AccountID: a.ID, Email: "owner@acme.example",
		Role: domain.RoleOwner, PasswordHash: testHash(), Active: true, CreatedAt: now}
	if err := st.CreateUser(ctx, owner); err != nil {
		b.Fatal(err)
	}
	ks := keys.New(st, nil)
	seedMany(b, st, ks, a, owner, now, 300)
	lim := ratelimit.NewMemory(time.Now)
	b.Cleanup(lim.Close)
	srv := httptest.NewServer(console.New(console.Config{Store: st, Keys: ks, Limiter: lim}))
	b.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) string {
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		return string(body)
	}
	csrf := csrfRE.FindStringSubmatch(get("/console/signin"))
	resp, err := client.PostForm(srv.URL+"/console/signin", url.Values{"csrf": {csrf[1]}, "email": {owner.Email}, "password": {testPassword}})
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		b.Fatalf("sign in: %v %v", err, resp)
	}
	resp.Body.Close()
	list := get("/console/developers")
	next := strings.ReplaceAll(nextPageRE.FindStringSubmatch(list)[1], "&amp;", "&")
	keyID := keyRowRE.FindStringSubmatch(list)[1]
	for _, pg := range []struct{ name, path string }{
		{"keys", "/console/developers"},
		{"keys-page-2", next},
		{"keys-search", "/console/developers?q=key+02&status=active"},
		{"audit", "/console/developers/audit"},
		{"users", "/console/users"},
		{"key-form", "/console/developers/keys/new"},
		{"key", "/console/developers/keys/" + keyID},
		{"agents", "/console/agents"},
		{"agents-search", "/console/agents?q=agent+02"},
	} {
		b.Run(pg.name, func(b *testing.B) {
			start := time.Now()
			for b.Loop() {
				get(pg.path)
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/page")
		})
	}
}

// What the user typed (a search, a key name) comes back escaped in every
// new place it is shown: search boxes, page links, the picker, a related
// key's link in a history, the rotate and edit forms.
func TestListsEscapeWhatTheyShow(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	f.agent(a, `<img src=x onerror=alert(2)>`)
	const evil = `"><script>alert(1)</script>`
	k := f.key(a, owner, evil)
	b := f.signedIn(owner)
	rot, _ := b.created("/console/developers/keys/"+k.Key.ID+"/rotate", "/console/developers/keys/"+k.Key.ID+"/rotate", url.Values{"old_expires": {"1h"}})
	if !strings.Contains(rot.body, `id="old-stops"`) || !strings.Contains(rot.body, formatUTC(f.clock.Now().Add(time.Hour))) {
		t.Errorf("the rotation page does not say when the old key stops:\n%s", rot.body)
	}
	pages := []page{
		b.get("/console/developers?q=" + url.QueryEscape(evil)),
		b.get("/console/developers/audit?q=" + url.QueryEscape(evil)),
		b.get("/console/users?q=" + url.QueryEscape(evil)),
		b.get("/console/developers/keys/" + k.Key.ID),
		b.get("/console/developers/keys/" + k.Key.ID + "/rotate"),
		b.get("/console/developers/keys/" + k.Key.ID + "/edit"),
		b.get("/console/developers/audit"),
		b.post("/console/developers/keys/new", "/console/developers/keys", url.Values{"op": {"search-agents"}, "agent_q": {evil}, "name": {evil}}),
		b.get("/console/developers/keys/new"),
	}
	for _, p := range pages {
		if strings.Contains(p.body, "<script>alert") || strings.Contains(p.body, "<img src=x") {
			t.Errorf("%s (%d) shows raw markup", p.path, p.status)
		}
	}
	if !strings.Contains(pages[3].body, "replaced by <a href=") || !strings.Contains(pages[3].body, "&lt;script&gt;") {
		t.Errorf("the history does not link the new key by its escaped name:\n%s", pages[3].body)
	}
}

// A credential pasted into a search or filter box comes back as its public
// prefix only, never its secret: in the box and in the page's links. The
// Logs page's key filter takes it as its key.
func TestSearchesEchoACredentialsPrefixOnly(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k := f.key(a, owner, "Deploy")
	cred, secret := k.Credential, k.Credential[len(k.Credential)-38:]
	b := f.signedIn(owner)
	for _, path := range []string{
		"/console/developers?q=" + url.QueryEscape(cred),
		"/console/developers/audit?q=" + url.QueryEscape(cred),
		"/console/users?q=" + url.QueryEscape(cred),
		"/console/developers/logs?key=" + url.QueryEscape(cred),
		"/console/developers/logs?id=" + url.QueryEscape(cred),
		"/console/developers/logs?route=" + url.QueryEscape("GET /v1/me?k="+cred),
		"/console/developers/logs?key=" + url.QueryEscape(strings.ToUpper(cred)), // no key: the form again
	} {
		p, box := b.get(path), path[:strings.IndexByte(path, '=')+1]
		if strings.Contains(p.body, secret) || strings.Contains(strings.ToUpper(p.body), strings.ToUpper(secret)) {
			t.Errorf("%s (%d) shows the credential's secret", box, p.status)
		}
		if !strings.Contains(strings.ToLower(p.body), k.Key.Prefix) {
			t.Errorf("%s (%d) does not show the credential's prefix", box, p.status)
		}
	}
	p := b.get("/console/developers/logs?key=" + url.QueryEscape(cred))
	wantStatus(t, "logs by a pasted credential", p, http.StatusOK)
	wantHolds(t, "logs by a pasted credential", p.body, []string{`value="` + k.Key.Prefix + `"`}, nil)
}

// Rotation refuses a choice it does not offer, beside the field, and
// changes nothing; editing marks a faulty name beside the field.
func TestRotateAndEditFieldErrors(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k := f.key(a, owner, "prod")
	b := f.signedIn(owner)
	path := "/console/developers/keys/" + k.Key.ID
	p := b.post(path+"/rotate", path+"/rotate", url.Values{"old_expires": {"forever"}})
	wantStatus(t, "unknown choice", p, http.StatusUnprocessableEntity)
	if !strings.Contains(p.body, `aria-invalid="true" aria-describedby="old_expires-error"`) || !strings.Contains(p.body, `id="old_expires-error"`) {
		t.Fatalf("the choice is not marked:\n%s", p.body)
	}
	if ks, _ := f.keys.List(context.Background(), a.ID); len(ks) != 1 {
		t.Fatal("a refused rotation made a key")
	}
	p = b.post(path+"/edit", path+"/edit", url.Values{"name": {"\u200b"}, "description": {"kept"}})
	wantStatus(t, "invisible name", p, http.StatusUnprocessableEntity)
	if !strings.Contains(p.body, `id="key-name" value="`) || !strings.Contains(p.body, `aria-describedby="name-error"`) ||
		!strings.Contains(p.body, `id="name-error"`) || !strings.Contains(p.body, ">kept</textarea>") || strings.Contains(p.body, `id="form-error"`) {
		t.Fatalf("the name is not marked:\n%s", p.body)
	}
	p = b.post(path+"/edit", path+"/edit", url.Values{"name": {"prod v2"}, "description": {""}})
	wantRedirect(t, "edit", p, path+"?done=edited")
	if got, _ := f.keys.Get(context.Background(), a.ID, k.Key.ID); got.Name != "prod v2" {
		t.Fatalf("name %q", got.Name)
	}
}

// walkPages follows a list's "Next page" links from path, then its
// "Previous page" links back, and returns the ids (rowRE's first group) it
// saw and the pages it read; each page must answer 200 with 1 to 50 rows,
// no id may come twice, and each page read backwards must hold what it
// held forwards, the first one without a previous page.
func walkPages(t *testing.T, b *browser, path string, rowRE *regexp.Regexp) (map[string]bool, int) {
	t.Helper()
	seen := map[string]bool{}
	var forward []string
	var p page
	for path != "" {
		var ids []string
		p, ids = listPage(t, b, path, rowRE)
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("%s: %s again", path, id)
			}
			seen[id] = true
		}
		forward = append(forward, strings.Join(ids, " "))
		path = pageLink(nextPageRE, p)
	}
	for i := len(forward) - 2; i >= 0; i-- {
		path = pageLink(prevPageRE, p)
		var ids []string
		p, ids = listPage(t, b, path, rowRE)
		if got := strings.Join(ids, " "); got != forward[i] {
			t.Fatalf("page %d read backwards (%s) holds %s, forwards %s", i+1, path, got, forward[i])
		}
	}
	if prev := pageLink(prevPageRE, p); prev != "" {
		t.Fatalf("the first page links a previous one: %s", prev)
	}
	return seen, len(forward)
}

var prevPageRE = regexp.MustCompile(`href="([^"]+)" rel="prev"`)

// listPage reads a page of a list and the ids of its rows.
func listPage(t *testing.T, b *browser, path string, rowRE *regexp.Regexp) (page, []string) {
	t.Helper()
	p := b.get(path)
	wantStatus(t, path, p, http.StatusOK)
	var ids []string
	for _, m := range rowRE.FindAllStringSubmatch(p.body, -1) {
		ids = append(ids, m[1])
	}
	if len(ids) > 50 || len(ids) == 0 {
		t.Fatalf("%s: %d rows", path, len(ids))
	}
	return p, ids
}

// pageLink is p's link that re finds, "" when it has none.
func pageLink(re *regexp.Regexp, p page) string {
	if m := re.FindStringSubmatch(p.body); m != nil {
		return strings.ReplaceAll(m[1], "&amp;", "&")
	}
	return ""
}

// TestPastTheLastPage: a page link past the end of the keys list (an old
// link, after keys were revoked, or one edited by hand) shows no keys and
// a way back to the first page, not the "create your first key" of an
// account without keys.
func TestPastTheLastPage(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	f.key(a, owner, "Deploy")
	p := f.signedIn(owner).get("/console/developers?after=-1.key_")
	wantStatus(t, "past the last page", p, http.StatusOK)
	wantHolds(t, "past the last page", p.body, []string{"No keys match.", `href="/console/developers"`}, []string{"Create your first key"})
}
