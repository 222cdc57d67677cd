package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
)

// The key form takes an IP allowlist (a bad entry is marked beside the box
// and makes no key); the key page shows it; the edit form changes it,
// audited in the key's history, applying to the API's next request; the
// edit needs the session's CSRF token and an Owner or Admin.
func TestConsoleAllowedIPs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, owner := f.account("Acme")
	b := f.signedIn(owner)
	form := func(ips string) url.Values {
		return url.Values{"name": {"ci"}, "preset": {"aiagent-read"}, "env": {"live"}, "expiry": {"never"}, "allowed_ips": {ips}}
	}
	p := b.post("/console/developers/keys/new", "/console/developers/keys", form("127.0.0.2, 10.0.0.1/8"))
	wantStatus(t, "bad entry", p, http.StatusUnprocessableEntity)
	if !strings.Contains(p.body, `id="allowed-ips-error"`) || !strings.Contains(p.body, "did you mean 10.0.0.0/8?") ||
		!strings.Contains(p.body, "127.0.0.2, 10.0.0.1/8</textarea>") {
		t.Fatalf("the box is not marked or not kept:\n%s", p.body)
	}
	if ks, _ := f.keys.List(ctx, a.ID); len(ks) != 0 {
		t.Fatal("a refused form made a key")
	}
	_, cred := b.created("/console/developers/keys/new", "/console/developers/keys", form("192.0.2.1\n2001:db8::/32"))
	ks, _ := f.keys.List(ctx, a.ID)
	if len(ks) != 1 || ks[0].AllowedIPs.String() != "192.0.2.1, 2001:db8::/32" {
		t.Fatalf("stored %+v", ks)
	}
	path := "/console/developers/keys/" + ks[0].ID
	if page := b.get(path); !strings.Contains(page.body, "<code>192.0.2.1</code>, <code>2001:db8::/32</code>") {
		t.Fatalf("key page does not show the list:\n%s", page.body)
	}
	if got := f.apiStatus(cred); got != http.StatusForbidden {
		t.Fatalf("from 127.0.0.1 outside the list: %d", got)
	}

	edit := url.Values{"name": {"ci"}, "description": {""}, "allowed_ips": {"127.0.0.1"}}
	// Without the token, with another role: nothing changes.
	wantStatus(t, "no CSRF token", b.do(http.MethodPost, path+"/edit", edit), http.StatusForbidden)
	for _, role := range []domain.Role{domain.RoleAgent} {
		u := f.user(a, string(role)+"@acme.example", role)
		o := f.browser()
		o.signIn(u.Email, testPassword, "/console/")
		wantStatus(t, string(role)+" edits", o.post("/console/agents", path+"/edit", edit), http.StatusNotFound)
	}
	if k, _ := f.keys.Get(ctx, a.ID, ks[0].ID); k.AllowedIPs.String() != "192.0.2.1, 2001:db8::/32" {
		t.Fatalf("a refused edit changed the list to %q", k.AllowedIPs.String())
	}
	if page := b.get(path + "/edit"); !strings.Contains(page.body, "192.0.2.1\n2001:db8::/32</textarea>") {
		t.Fatalf("edit form does not hold the list:\n%s", page.body)
	}
	p = b.post(path+"/edit", path+"/edit", url.Values{"name": {"ci"}, "allowed_ips": {"300.1.1.1"}})
	wantStatus(t, "bad edit", p, http.StatusUnprocessableEntity)
	if !strings.Contains(p.body, `id="allowed-ips-error"`) {
		t.Fatalf("the box is not marked:\n%s", p.body)
	}
	admin := f.user(a, "admin@acme.example", domain.RoleAdmin)
	ab := f.signedIn(admin)
	wantRedirect(t, "edit", ab.post(path+"/edit", path+"/edit", edit), path+"?done=edited")
	if got := f.apiStatus(cred); got != http.StatusOK {
		t.Fatalf("from 127.0.0.1 after the edit: %d", got)
	}
	history := b.get(path)
	if !strings.Contains(history.body, "allowed addresses changed") || !strings.Contains(history.body, "192.0.2.1, 2001:db8::/32 → 127.0.0.1") {
		t.Fatalf("the history does not record the edit:\n%s", history.body)
	}
}
