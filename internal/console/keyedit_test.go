package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// me is GET /v1/me's key: its scopes and expiry.
func (f *fixture) me(cred string) (scopes []string, expiresAt *string) {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Scopes    []string `json:"scopes"`
			ExpiresAt *string  `json:"expires_at"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		f.t.Fatalf("GET /v1/me: %d %v", resp.StatusCode, err)
	}
	return body.Data.Scopes, body.Data.ExpiresAt
}

// TestEditKeyAccess edits a key's scopes, agents and expiry in the
// console: the API's next request with the key (held in memory since the
// request before) sees them, the history says before and after, and an
// expiry moved later is refused on its field, changing nothing.
func TestEditKeyAccess(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, owner := f.account("Acme")
	ag := f.agent(a, "Agent 2")
	b := f.signedIn(owner)
	_, cred := b.created("/console/developers/keys/new", "/console/developers/keys",
		url.Values{"name": {"ci"}, "preset": {"aiagent-read"}, "env": {"live"}, "expiry": {"never"}})
	if scopes, exp := f.me(cred); !slices.Equal(scopes, []string{"aiagents:read"}) || exp != nil {
		t.Fatalf("before: %v %v", scopes, exp)
	}
	ks, _ := f.keys.List(ctx, a.ID)
	path := "/console/developers/keys/" + ks[0].ID
	form := b.get(path + "/edit")
	for _, want := range []string{`value="aiagent-read" id="preset-aiagent-read" checked`, `<option value="keep" selected>Unchanged (never)</option>`} {
		if !strings.Contains(form.body, want) {
			t.Fatalf("edit form lacks %s:\n%s", want, form.body)
		}
	}
	edit := url.Values{"name": {"ci"}, "preset": {"aiagent-query"}, "agent": {ag.ID}, "expiry": {"7"}, "allowed_ips": {""}}
	wantRedirect(t, "edit", b.post(path+"/edit", path+"/edit", edit), path+"?done=edited")
	scopes, exp := f.me(cred)
	if !slices.Equal(scopes, []string{"aiagents:read", "aiagents:query"}) || exp == nil {
		t.Fatalf("after the edit: %v %v", scopes, exp)
	}
	k, _ := f.keys.Get(ctx, a.ID, ks[0].ID)
	if !slices.Equal(k.AgentIDs, []string{ag.ID}) {
		t.Fatalf("agents %v", k.AgentIDs)
	}
	f.clock.Advance(3 * time.Minute)
	history := b.get(path)
	if made := k.CreatedAt.UTC(); !strings.Contains(history.body, `<time datetime="`+made.Format(time.RFC3339)+`" title="`+made.Format("2006-01-02 15:04:05")+` UTC">3 min ago</time>`) {
		t.Fatalf("the creation time is not relative with the UTC time on hover:\n%s", history.body)
	}
	for _, want := range []string{"access changed", "scopes: aiagents:read → aiagents:read, aiagents:query", `AI agents: every AI agent → &#34;Agent 2&#34;`, "expires: never → "} {
		if !strings.Contains(history.body, want) {
			t.Fatalf("history lacks %s:\n%s", want, history.body)
		}
	}

	edit.Set("expiry", "30")
	p := b.post(path+"/edit", path+"/edit", edit)
	wantStatus(t, "later expiry", p, http.StatusUnprocessableEntity)
	if !strings.Contains(p.body, `id="expiry-error"`) || !strings.Contains(p.body, "only be brought earlier") {
		t.Fatalf("the expiry is not marked:\n%s", p.body)
	}
	if again, _ := f.keys.Get(ctx, a.ID, ks[0].ID); !again.ExpiresAt.Equal(*k.ExpiresAt) {
		t.Fatalf("a refused edit moved the expiry to %v", again.ExpiresAt)
	}
	// A refused name saves none of the rest.
	edit.Set("expiry", "keep")
	edit.Set("preset", "full-access")
	edit.Set("name", "\u200b")
	wantStatus(t, "invisible name", b.post(path+"/edit", path+"/edit", edit), http.StatusUnprocessableEntity)
	if again, _ := f.keys.Get(ctx, a.ID, ks[0].ID); len(again.Scopes) != 2 {
		t.Fatalf("a refused name saved the scopes %v", again.Scopes)
	}
}

// TestPickerSortsNaturally: the key form's agent picker lists Agent 2
// before Agent 6 before Agent 10, and the form and the keys list name the
// presets as the contract does.
func TestPickerSortsNaturally(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	for _, n := range []string{"Agent 10", "Agent 6", "Agent 2"} {
		f.agent(a, n)
	}
	b := f.signedIn(owner)
	form := b.get("/console/developers/keys/new").body
	i2, i6, i10 := strings.Index(form, "> <bdi>Agent 2<"), strings.Index(form, "> <bdi>Agent 6<"), strings.Index(form, "> <bdi>Agent 10<")
	if i2 < 0 || i2 > i6 || i6 > i10 {
		t.Errorf("picker order: Agent 2 at %d, 6 at %d, 10 at %d", i2, i6, i10)
	}
	// One name per preset, its CLI id, in the form, the list and the
	// key's page (the form once named one "AI agent read", another
	// "aiagent-query").
	for _, label := range []string{`data-scopes="aiagents:read"> aiagent-read</label>`, `data-scopes="aiagents:read aiagents:query"> aiagent-query</label>`,
		`> full-access</label>`, `id="preset-custom"> Custom</label>`} {
		if !strings.Contains(form, label) {
			t.Errorf("the form lacks %q", label)
		}
	}
	if strings.Contains(form, "AI agent read") {
		t.Error("the form still names a preset AI agent read")
	}
	b.created("/console/developers/keys/new", "/console/developers/keys",
		url.Values{"name": {"ci"}, "preset": {"aiagent-read"}, "env": {"live"}, "expiry": {"never"}})
	list := b.get("/console/developers").body
	if !strings.Contains(list, `<span class="strong preset">aiagent-read</span>`) || strings.Contains(list, "AI agent read") {
		t.Errorf("the keys list does not name the preset aiagent-read:\n%s", list)
	}
}

// TestFavicon: every page links the console's icon, served with the
// static files as SVG.
func TestFavicon(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	if p := b.get("/console/signin"); !strings.Contains(p.body, `<link rel="icon" href="/console/static/favicon.svg" type="image/svg+xml">`) {
		t.Fatalf("no icon link:\n%s", p.body)
	}
	p := b.get("/console/static/favicon.svg")
	wantStatus(t, "favicon", p, http.StatusOK)
	if ct := p.header.Get("Content-Type"); ct != "image/svg+xml" || !strings.HasPrefix(p.body, "<svg") {
		t.Fatalf("favicon: %s %.40s", ct, p.body)
	}
}
