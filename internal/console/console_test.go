package console_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/clientaddr"
	"github.com/agentapi/agentapi/internal/console"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
)

func TestSignedOutGoesToSignIn(t *testing.T) {
	f := newFixture(t)
	b := f.browser()
	for _, path := range []string{"/console/", "/console/developers", "/console/developers/keys/new",
		"/console/users", "/console/agents", "/console/password", "/console/nope"} {
		p := b.get(path)
		wantRedirect(t, "GET "+path, p, "/console/signin")
	}
	p := b.get("/console/developers/audit")
	if got := p.header.Get("Location"); got != "/console/signin?next=%2Fconsole%2Fdevelopers%2Faudit" {
		t.Fatalf("next not kept: %q", got)
	}
	// A POST without a session goes to sign-in too, and changes nothing.
	p = b.do(http.MethodPost, "/console/developers/keys", url.Values{"name": {"x"}, "preset": {"full-access"}})
	wantRedirect(t, "POST signed out", p, "/console/signin")
	// The root of the site leads to the console.
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(f.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/console/" {
		t.Fatalf("GET /: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestSignInSessionAndSignOut(t *testing.T) {
	f := newFixture(t)
	_, owner := f.account("Acme")
	b := f.browser()

	p := b.signInRaw(owner.Email, "wrong password")
	wantStatus(t, "wrong password", p, http.StatusUnauthorized)
	unknown := b.signInRaw("nobody@acme.example", testPassword)
	wantStatus(t, "unknown email", unknown, http.StatusUnauthorized)
	if !strings.Contains(p.body, "The email or password is incorrect") || !strings.Contains(unknown.body, "The email or password is incorrect") {
		t.Fatal("the refusal message differs or is missing")
	}

	p = b.signInRaw(" OWNER@acme.example ", testPassword)
	wantRedirect(t, "sign in", p, "/console/")
	var token string
	for _, c := range strings.Split(strings.Join(p.header.Values("Set-Cookie"), "\n"), "\n") {
		if strings.HasPrefix(c, "agentapi_session=") {
			token = strings.TrimPrefix(strings.SplitN(c, ";", 2)[0], "agentapi_session=")
			for _, attr := range []string{"Path=/console/", "HttpOnly", "SameSite=Lax", "Max-Age=43200"} {
				if !strings.Contains(c, attr) {
					t.Errorf("session cookie lacks %s: %s", attr, c)
				}
			}
			if strings.Contains(c, "Secure") {
				t.Errorf("Secure on a plain-HTTP server: %s", c)
			}
		}
	}
	if token == "" {
		t.Fatal("no session cookie")
	}
	f.secrets = append(f.secrets, token)
	// Only the SHA-256 of the token is stored.
	ctx := context.Background()
	h := sha256.Sum256([]byte(token))
	if _, _, err := f.st.SessionUser(ctx, h[:], f.clock.Now()); err != nil {
		t.Fatalf("session by hash: %v", err)
	}
	if _, _, err := f.st.SessionUser(ctx, []byte(token), f.clock.Now()); err == nil {
		t.Fatal("the session is stored under the plain token")
	}

	wantRedirect(t, "home of an owner", b.get("/console/"), "/console/developers")
	wantStatus(t, "developers", b.get("/console/developers"), http.StatusOK)

	p = b.post("/console/developers", "/console/signout", nil)
	wantRedirect(t, "sign out", p, "/console/signin")
	if _, _, err := f.st.SessionUser(ctx, h[:], f.clock.Now()); err == nil {
		t.Fatal("sign-out left the session row")
	}
	wantRedirect(t, "after sign-out", b.get("/console/developers"), "/console/signin")
}

// Behind a TLS-terminating proxy (production) the cookies are Secure too.
func TestCookiesAreSecureBehindATLSProxy(t *testing.T) {
	f := newFixture(t)
	_, owner := f.account("Acme")
	for _, proto := range []string{"https", "HTTPS, http"} {
		b := f.browser()
		b.header.Set("X-Forwarded-Proto", proto)
		p := b.signInRaw(owner.Email, testPassword)
		wantRedirect(t, "sign in", p, "/console/")
		cookies := p.header.Values("Set-Cookie")
		if len(cookies) == 0 {
			t.Fatal("no cookie set")
		}
		for _, c := range cookies {
			if strings.HasPrefix(c, "agentapi_session=") && !strings.Contains(c, "; Secure") {
				t.Errorf("X-Forwarded-Proto %q: session cookie without Secure: %s", proto, c)
			}
		}
	}
}

func TestSessionExpires(t *testing.T) {
	f := newFixture(t)
	_, owner := f.account("Acme")
	b := f.signedIn(owner)
	f.clock.Advance(12*time.Hour - time.Second)
	wantStatus(t, "just before expiry", b.get("/console/developers"), http.StatusOK)
	f.clock.Advance(time.Second)
	wantRedirect(t, "at expiry", b.get("/console/developers"), "/console/signin")
}

func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t)
	_, owner := f.account("Acme")
	anon, b := f.browser(), f.browser()
	b.signIn(owner.Email, testPassword, "/console/")
	pages := map[string]page{
		"sign-in":    anon.get("/console/signin"),
		"developers": b.get("/console/developers"),
		"new key":    b.get("/console/developers/keys/new"),
		"not found":  b.get("/console/nope"),
		"redirect":   anon.get("/console/developers"),
		"static":     anon.get("/console/static/console.css"),
	}
	for name, p := range pages {
		checkSecurityHeaders(t, name, p.header)
	}
	if ct := pages["static"].header.Get("Content-Type"); !strings.HasPrefix(ct, "text/css") {
		t.Errorf("static CSS served as %q", ct)
	}
	// No inline script or style anywhere: the CSP would block it.
	for name, p := range pages {
		if strings.Contains(p.body, "<script>") || strings.Contains(p.body, " style=") || strings.Contains(p.body, "onclick") {
			t.Errorf("%s: inline script or style", name)
		}
	}
	// No listing, and the console's own 404 page for a path naming no file.
	for _, path := range []string{"/console/static/", "/console/static/nothing.css", "/console/static/nothing/"} {
		p := anon.get(path)
		wantStatus(t, path, p, http.StatusNotFound)
		if ct := p.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") || !strings.Contains(p.body, "There is no such page.") {
			t.Errorf("%s: 404 as %q: %.80q", path, ct, p.body)
		}
	}
}

// checkSecurityHeaders wants page name's protections in h: a CSP without
// inline code, no framing or sniffing, and no caching unless static.
func checkSecurityHeaders(t *testing.T, name string, h http.Header) {
	t.Helper()
	csp := h.Get("Content-Security-Policy")
	for _, d := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'self'"} {
		if !strings.Contains(csp, d) {
			t.Errorf("%s: CSP %q lacks %s", name, csp, d)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("%s: CSP allows inline code: %q", name, csp)
	}
	for k, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"} {
		if got := h.Get(k); got != want {
			t.Errorf("%s: %s = %q, want %q", name, k, got, want)
		}
	}
	if name != "static" && h.Get("Cache-Control") != "no-store" {
		t.Errorf("%s: Cache-Control %q", name, h.Get("Cache-Control"))
	}
}

// developerRoutes are every Developers route, GET and POST, for a key id.
func developerRoutes(keyID string) (gets, posts []string) {
	gets = []string{"/console/developers", "/console/developers/keys/new", "/console/developers/keys/" + keyID,
		"/console/developers/keys/" + keyID + "/revoke", "/console/developers/audit",
		"/console/developers/keys/" + keyID + "/rotate", "/console/developers/keys/" + keyID + "/edit"}
	posts = []string{"/console/developers/keys", "/console/developers/keys/" + keyID + "/rotate",
		"/console/developers/keys/" + keyID + "/revoke", "/console/developers/keys/" + keyID + "/edit"}
	return gets, posts
}

func TestAgentRoleHasNoDevelopers(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	ag := f.agent(a, "Helper")
	k := f.key(a, owner, "prod")
	agentUser := f.user(a, "agent@acme.example", domain.RoleAgent)
	b := f.signedIn(agentUser)
	wantRedirect(t, "home of an agent", b.get("/console/"), "/console/agents")

	home := b.get("/console/agents")
	wantStatus(t, "agents page", home, http.StatusOK)
	if strings.Contains(home.body, "/console/developers") || strings.Contains(home.body, "Developers") ||
		strings.Contains(home.body, "/console/users") {
		t.Fatal("an agent-role user sees a Developers or Users link")
	}
	gets, posts := developerRoutes(k.Key.ID)
	gets = append(gets, "/console/users", "/console/users/"+owner.ID+"/deactivate")
	posts = append(posts, "/console/users", "/console/users/"+owner.ID+"/deactivate", "/console/agents/"+ag.ID)
	for _, path := range gets {
		p := b.get(path)
		wantStatus(t, "GET "+path, p, http.StatusNotFound)
		if strings.Contains(p.body, k.Key.Prefix) {
			t.Fatalf("GET %s shows the key", path)
		}
	}
	for _, path := range posts {
		p := b.post("/console/agents", path, url.Values{"name": {"sneaky"}, "preset": {"full-access"},
			"env": {"live"}, "email": {"x@acme.example"}, "role": {"owner"}, "instructions": {"pwned"}})
		wantStatus(t, "POST "+path, p, http.StatusNotFound)
	}
	// Nothing changed.
	if k2, _ := f.keys.Get(context.Background(), a.ID, k.Key.ID); k2.RevokedAt != nil {
		t.Fatal("an agent-role user revoked a key")
	}
	if ks, _ := f.keys.List(context.Background(), a.ID); len(ks) != 1 {
		t.Fatalf("an agent-role user made keys: %d", len(ks))
	}
	if us, _ := f.st.ListUsers(context.Background(), a.ID); len(us) != 2 || !us[0].Active {
		t.Fatal("an agent-role user changed users")
	}
	if got, _ := f.st.GetAgent(context.Background(), a.ID, ag.ID); got.Instructions != "Be helpful." {
		t.Fatal("an agent-role user edited instructions")
	}
	// The agent page is theirs to read, without an edit form.
	p := b.get("/console/agents/" + ag.ID)
	wantStatus(t, "agent page", p, http.StatusOK)
	if !strings.Contains(p.body, "Be helpful.") || strings.Contains(p.body, `name="instructions"`) {
		t.Fatal("agent page: instructions missing or editable")
	}
}

func TestAdminManagesKeysButNotUsers(t *testing.T) {
	f := newFixture(t)
	a, _ := f.account("Acme")
	admin := f.user(a, "admin@acme.example", domain.RoleAdmin)
	b := f.signedIn(admin)
	p := b.get("/console/developers")
	wantStatus(t, "developers", p, http.StatusOK)
	if !strings.Contains(p.body, `href="/console/developers"`) || strings.Contains(p.body, `href="/console/users"`) {
		t.Fatal("an Admin's nav: Developers missing or Users shown")
	}
	wantStatus(t, "users", b.get("/console/users"), http.StatusNotFound)
	wantStatus(t, "invite", b.post("/console/developers", "/console/users", url.Values{"email": {"x@acme.example"}, "role": {"owner"}}), http.StatusNotFound)
}

func TestOtherAccountsIDsAreNotFound(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	other, otherOwner := f.account("Globex")
	theirKey := f.key(other, otherOwner, "theirs")
	theirAgent := f.agent(other, "Their agent")
	f.agent(a, "Ours")
	b := f.signedIn(owner)

	gets, posts := developerRoutes(theirKey.Key.ID)
	for _, path := range gets[2:] {
		if path == "/console/developers/audit" {
			continue // not a key's page
		}
		wantStatus(t, "GET "+path, b.get(path), http.StatusNotFound)
	}
	for _, path := range posts[1:] {
		wantStatus(t, "POST "+path, b.post("/console/developers", path, nil), http.StatusNotFound)
	}
	wantStatus(t, "their agent", b.get("/console/agents/"+theirAgent.ID), http.StatusNotFound)
	wantStatus(t, "edit their agent", b.post("/console/developers", "/console/agents/"+theirAgent.ID,
		url.Values{"instructions": {"pwned"}}), http.StatusNotFound)
	wantStatus(t, "deactivate their owner", b.get("/console/users/"+otherOwner.ID+"/deactivate"), http.StatusNotFound)
	wantStatus(t, "deactivate their owner (POST)", b.post("/console/developers", "/console/users/"+otherOwner.ID+"/deactivate", nil), http.StatusNotFound)
	// A key restricted to their agent is refused.
	p := b.post("/console/developers/keys/new", "/console/developers/keys", url.Values{
		"name": {"x"}, "preset": {"aiagent-read"}, "env": {"live"}, "expiry": {"never"}, "agent": {theirAgent.ID}})
	wantStatus(t, "restricted to their agent", p, http.StatusUnprocessableEntity)
	if credentialRE.MatchString(p.body) {
		t.Fatal("a key was issued")
	}

	if k, _ := f.keys.Get(context.Background(), other.ID, theirKey.Key.ID); k.RevokedAt != nil || k.Name != "theirs" || k.ExpiresAt != nil {
		t.Fatal("their key was revoked, renamed or given an expiry")
	}
	if ks, _ := f.keys.List(context.Background(), other.ID); len(ks) != 1 {
		t.Fatal("their key was rotated")
	}
	if u, _ := f.st.GetUser(context.Background(), otherOwner.ID); !u.Active {
		t.Fatal("their owner was deactivated")
	}
	if ag, _ := f.st.GetAgent(context.Background(), other.ID, theirAgent.ID); ag.Instructions != "Be helpful." {
		t.Fatal("their agent was edited")
	}
	if f.apiStatus(theirKey.Credential) != http.StatusOK {
		t.Fatal("their key stopped working")
	}
}

func TestCSRFAndCrossOrigin(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k := f.key(a, owner, "prod")
	b, other := f.browser(), f.browser()
	b.signIn(owner.Email, testPassword, "/console/")
	second := f.user(a, "admin@acme.example", domain.RoleAdmin)
	other.signIn(second.Email, testPassword, "/console/")
	othersToken := csrfOf(t, other.get("/console/developers"))

	create := url.Values{"name": {"x"}, "preset": {"full-access"}, "env": {"live"}, "expiry": {"never"}}
	revoke := "/console/developers/keys/" + k.Key.ID + "/revoke"
	cases := []struct {
		name  string
		token string
	}{
		{"missing", ""},
		{"wrong", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
		{"another session's", othersToken},
	}
	for _, c := range cases {
		for _, path := range []string{"/console/developers/keys", revoke, "/console/users", "/console/signout",
			strings.Replace(revoke, "/revoke", "/edit", 1), strings.Replace(revoke, "/revoke", "/rotate", 1)} {
			form := url.Values{}
			for k, v := range create {
				form[k] = v
			}
			form.Set("email", "new@acme.example")
			form.Set("role", "owner")
			if c.token != "" {
				form.Set("csrf", c.token)
			}
			p := b.do(http.MethodPost, path, form)
			wantStatus(t, c.name+" token on "+path, p, http.StatusForbidden)
		}
	}
	// Cross-origin posts are refused even with the right token.
	for name, h := range map[string][2]string{
		"Origin":         {"Origin", "https://evil.example"},
		"Sec-Fetch-Site": {"Sec-Fetch-Site", "cross-site"},
		"same-site":      {"Sec-Fetch-Site", "same-site"},
	} {
		token := csrfOf(t, b.get("/console/developers"))
		b.header.Set(h[0], h[1])
		form := url.Values{"csrf": {token}}
		p := b.do(http.MethodPost, revoke, form)
		b.header.Del(h[0])
		wantStatus(t, "cross-origin by "+name, p, http.StatusForbidden)
		if !strings.Contains(p.body, "This request came from another site and was refused.") || !strings.Contains(p.body, `class="status-code"`) {
			t.Fatalf("cross-origin by %s: not the console's 403 page:\n%s", name, p.body)
		}
	}
	// The sign-in form needs its own token.
	anon := f.browser()
	p := anon.do(http.MethodPost, "/console/signin", url.Values{"email": {owner.Email}, "password": {testPassword}})
	wantStatus(t, "sign-in without token", p, http.StatusForbidden)

	// Nothing happened.
	if got, _ := f.keys.Get(context.Background(), a.ID, k.Key.ID); got.RevokedAt != nil {
		t.Fatal("the key was revoked")
	}
	if ks, _ := f.keys.List(context.Background(), a.ID); len(ks) != 1 {
		t.Fatal("a key was created")
	}
	if _, err := f.st.GetUserByEmail(context.Background(), "new@acme.example"); err == nil {
		t.Fatal("a user was invited")
	}
	wantStatus(t, "still signed in", b.get("/console/developers"), http.StatusOK)
	// With the token and a same-origin header it works.
	b.header.Set("Origin", f.srv.URL)
	wantRedirect(t, "same-origin revoke", b.post("/console/developers", revoke, nil), "/console/developers/keys/"+k.Key.ID)
}

// TestCrossSiteSignInAndCreateRefused: a browser's Sec-Fetch-Site:
// cross-site refuses a sign-in and a key creation that carry their right
// tokens, with the console's 403 page, and nothing happens.
func TestCrossSiteSignInAndCreateRefused(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	anon := f.browser()
	token := csrfOf(t, anon.get("/console/signin"))
	anon.header.Set("Sec-Fetch-Site", "cross-site")
	p := anon.do(http.MethodPost, "/console/signin", url.Values{"email": {owner.Email}, "password": {testPassword}, "csrf": {token}})
	wantStatus(t, "cross-site sign-in", p, http.StatusForbidden)
	if !strings.Contains(p.body, "This request came from another site and was refused.") {
		t.Fatalf("cross-site sign-in: not the console's 403 page:\n%s", p.body)
	}
	for _, c := range p.header.Values("Set-Cookie") {
		if strings.HasPrefix(c, "agentapi_session=") {
			t.Fatal("a cross-site sign-in started a session")
		}
	}

	b := f.signedIn(owner)
	token = csrfOf(t, b.get("/console/developers/keys/new"))
	b.header.Set("Sec-Fetch-Site", "cross-site")
	p = b.do(http.MethodPost, "/console/developers/keys", url.Values{"name": {"x"}, "preset": {"full-access"},
		"env": {"live"}, "expiry": {"never"}, "csrf": {token}})
	wantStatus(t, "cross-site create", p, http.StatusForbidden)
	if ks, _ := f.keys.List(context.Background(), a.ID); len(ks) != 0 {
		t.Fatal("a cross-site post made a key")
	}
	// The same post from the console itself works.
	b.header.Set("Sec-Fetch-Site", "same-origin")
	p = b.do(http.MethodPost, "/console/developers/keys", url.Values{"name": {"x"}, "preset": {"full-access"},
		"env": {"live"}, "expiry": {"never"}, "csrf": {token}})
	wantRedirect(t, "same-origin create", p, "/console/developers/keys/")
}

// TestServerErrorPage: an internal failure is the 500 page, which names
// the request id the log holds with the cause, and shows nothing of it.
func TestServerErrorPage(t *testing.T) {
	f := newFixture(t)
	_, owner := f.account("Acme")
	b := f.signedIn(owner)
	if err := f.st.Close(); err != nil {
		t.Fatal(err)
	}
	p := b.get("/console/developers")
	wantStatus(t, "store closed", p, http.StatusInternalServerError)
	id := p.header.Get("X-Request-Id")
	if id == "" || !strings.Contains(p.body, "quote request id "+id) {
		t.Fatalf("the 500 page does not name the request id %q:\n%s", id, p.body)
	}
	if strings.Contains(p.body, "closed") || strings.Contains(p.body, "sql") {
		t.Fatalf("the 500 page shows the cause:\n%s", p.body)
	}
	var logged bool
	for _, line := range strings.Split(f.logs.String(), "\n") {
		if strings.Contains(line, `"request_id":"`+id+`"`) && strings.Contains(line, "closed") {
			logged = true
		}
	}
	if !logged {
		t.Fatalf("no log line with the request id and the cause:\n%s", f.logs.String())
	}
}

// TestSignInThrottle: failures on one email from one address stop that
// address guessing it (10 a minute), not the user signing in from their
// own address; an address is stopped after 30 attempts on any emails.
func TestSignInThrottle(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	b := f.browser()
	for i := range 10 {
		wantStatus(t, fmt.Sprint("attempt ", i+1), b.signInRaw(owner.Email, "wrong password"), http.StatusUnauthorized)
	}
	p := b.signInRaw(owner.Email, testPassword)
	wantStatus(t, "11th attempt from that address, right password", p, http.StatusTooManyRequests)
	if p.header.Get("Retry-After") == "" || !strings.Contains(p.body, "Too many sign-in attempts") {
		t.Fatalf("429 without Retry-After or message: %q", p.header.Get("Retry-After"))
	}
	// The owner, at their own address, is not locked out by the guesser.
	signin := func(email, addr string) int {
		code, _ := directSignIn(t, f, email, testPassword, addr)
		return code
	}
	if got := signin(owner.Email, "192.0.2.7:5555"); got != http.StatusSeeOther {
		t.Fatalf("the owner from another address: %d", got)
	}
	// The guessing address has 30 attempts in all: 11 spent, 19 more on
	// other emails, then nothing, not even with a right password.
	second := f.user(a, "second@acme.example", domain.RoleAdmin)
	others := []domain.User{f.user(a, "third@acme.example", domain.RoleAdmin), f.user(a, "fourth@acme.example", domain.RoleAdmin)}
	for i := range 19 {
		wantStatus(t, fmt.Sprint("address attempt ", 12+i), b.signInRaw(others[i%2].Email, "wrong password"), http.StatusUnauthorized)
	}
	for range 10 {
		wantStatus(t, "another email, spent address", b.signInRaw(second.Email, testPassword), http.StatusTooManyRequests)
	}
	// Those refusals did not spend the email's own budgets elsewhere.
	if got := signin(second.Email, "192.0.2.8:5555"); got != http.StatusSeeOther {
		t.Fatalf("another email from another address: %d", got)
	}
	// A minute later the windows have passed.
	f.clock.Advance(61 * time.Second)
	b.signIn(owner.Email, testPassword, "/console/")
}

// TestSignInThrottleBehindAProxy: behind a trusted proxy each client has its
// own budget (X-Forwarded-For), and a client that connects directly cannot
// pick its address with the header.
func TestSignInThrottleBehindAProxy(t *testing.T) {
	proxies, err := clientaddr.Parse("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *console.Config) { c.ClientAddr = proxies })
	a, _ := f.account("Acme")
	// Known emails (an unknown one costs the real argon2 work).
	users := []domain.User{f.user(a, "u1@acme.example", domain.RoleAdmin), f.user(a, "u2@acme.example", domain.RoleAdmin),
		f.user(a, "u5@acme.example", domain.RoleAdmin)}
	const proxy = "10.0.0.1:443"
	// Thirty attempts from one client behind the proxy, spread over three
	// emails so that no (email, address) budget runs out.
	for i := range 30 {
		if code, _ := directSignIn(t, f, users[i%3].Email, "wrong password", proxy, "X-Forwarded-For: 203.0.113.1"); code != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d", i+1, code)
		}
	}
	if code, _ := directSignIn(t, f, users[0].Email, testPassword, proxy, "X-Forwarded-For: 203.0.113.1"); code != http.StatusTooManyRequests {
		t.Fatalf("that client's 31st attempt: %d", code)
	}
	// Another client through the same proxy is not affected.
	third := f.user(a, "u3@acme.example", domain.RoleAdmin)
	if code, _ := directSignIn(t, f, third.Email, testPassword, proxy, "X-Forwarded-For: 203.0.113.2"); code != http.StatusSeeOther {
		t.Fatalf("another client behind the proxy: %d", code)
	}
	// Directly connected, the header is the client's own words: ignored.
	for i := range 30 {
		directSignIn(t, f, users[i%3].Email, "wrong password", fmt.Sprintf("198.51.100.7:%d", 1000+i), fmt.Sprintf("X-Forwarded-For: 192.0.2.%d", i))
	}
	fourth := f.user(a, "u4@acme.example", domain.RoleAdmin)
	if code, _ := directSignIn(t, f, fourth.Email, testPassword, "198.51.100.7:2000", "X-Forwarded-For: 192.0.2.99"); code != http.StatusTooManyRequests {
		t.Fatalf("a direct client rotating X-Forwarded-For: %d", code)
	}
}

// TestPasswordChangeThrottle: guessing the current password on the
// Password page spends the same budget as sign-in attempts.
func TestPasswordChangeThrottle(t *testing.T) {
	f := newFixture(t)
	_, owner := f.account("Acme")
	b := f.browser()
	b.signIn(owner.Email, testPassword, "/console/") // one attempt of ten
	guess := func(current string) page {
		return b.post("/console/password", "/console/password",
			url.Values{"current": {current}, "new": {"a brand new password"}, "confirm": {"a brand new password"}})
	}
	for i := range 9 {
		wantStatus(t, fmt.Sprint("guess ", i+1), guess(fmt.Sprint("guess ", i)), http.StatusUnprocessableEntity)
	}
	p := guess(testPassword)
	wantStatus(t, "right password after nine guesses", p, http.StatusTooManyRequests)
	if p.header.Get("Retry-After") == "" || !strings.Contains(p.body, "Too many password attempts") {
		t.Fatalf("429 without Retry-After or message: %q", p.header.Get("Retry-After"))
	}
	f.clock.Advance(61 * time.Second)
	wantRedirect(t, "a minute later", guess(testPassword), "/console/")
}

func TestDeactivatedUserIsSignedOutAtOnce(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	agentUser := f.user(a, "agent@acme.example", domain.RoleAgent)
	ob, ab := f.browser(), f.browser()
	ob.signIn(owner.Email, testPassword, "/console/")
	ab.signIn(agentUser.Email, testPassword, "/console/")
	wantStatus(t, "agent before", ab.get("/console/agents"), http.StatusOK)

	confirm := ob.get("/console/users/" + agentUser.ID + "/deactivate")
	wantStatus(t, "confirmation page", confirm, http.StatusOK)
	if !strings.Contains(confirm.body, "Deactivate <bdi>agent@acme.example</bdi>?") {
		t.Fatal("no confirmation step")
	}
	p := ob.post("/console/users", "/console/users/"+agentUser.ID+"/deactivate", nil)
	wantRedirect(t, "deactivate", p, "/console/users")

	wantRedirect(t, "agent's next request", ab.get("/console/agents"), "/console/signin")
	wantStatus(t, "agent signs in again", ab.signInRaw(agentUser.Email, testPassword), http.StatusUnauthorized)

	// An Owner cannot deactivate themselves.
	wantStatus(t, "self, page", ob.get("/console/users/"+owner.ID+"/deactivate"), http.StatusConflict)
	wantStatus(t, "self, POST", ob.post("/console/users", "/console/users/"+owner.ID+"/deactivate", nil), http.StatusConflict)
	if u, _ := f.st.GetUser(context.Background(), owner.ID); !u.Active {
		t.Fatal("the owner deactivated themselves")
	}
	users := ob.get("/console/users")
	if !strings.Contains(users.body, "deactivated") || strings.Contains(users.body, "/console/users/"+owner.ID+"/deactivate") {
		t.Fatal("users page: no deactivated badge, or a self-deactivate link")
	}
}

func TestInviteAndForcedPasswordChange(t *testing.T) {
	f := newFixture(t)
	_, owner := f.account("Acme")
	ob := f.signedIn(owner)

	p := ob.post("/console/users", "/console/users", url.Values{"email": {"Ann@Acme.example"}, "role": {"admin"}})
	wantStatus(t, "invite", p, http.StatusCreated)
	if p.header.Get("Cache-Control") != "no-store" {
		t.Fatal("one-time password page may be cached")
	}
	m := regexpFind(`id="one-time-password" class="credential">([^<]+)<`, p.body)
	if m == "" {
		t.Fatalf("no one-time password shown:\n%s", p.body)
	}
	oneTime := m
	f.secrets = append(f.secrets, oneTime)
	if strings.Contains(ob.get("/console/users").body, oneTime) {
		t.Fatal("the one-time password is shown again")
	}
	wantStatus(t, "invite same email", ob.post("/console/users", "/console/users",
		url.Values{"email": {"ann@acme.example"}, "role": {"agent"}}), http.StatusUnprocessableEntity)
	wantStatus(t, "invite bad email", ob.post("/console/users", "/console/users",
		url.Values{"email": {"Ann <ann@x.example>"}, "role": {"agent"}}), http.StatusUnprocessableEntity)
	wantStatus(t, "invite an email that is not UTF-8", ob.post("/console/users", "/console/users",
		url.Values{"email": {"x\xff@acme.example"}, "role": {"agent"}}), http.StatusUnprocessableEntity)
	wantStatus(t, "invite bad role", ob.post("/console/users", "/console/users",
		url.Values{"email": {"bob@acme.example"}, "role": {"root"}}), http.StatusUnprocessableEntity)

	b := f.browser()
	b.signIn("ann@acme.example", oneTime, "/console/password")
	for _, path := range []string{"/console/", "/console/developers", "/console/agents"} {
		wantRedirect(t, "forced: GET "+path, b.get(path), "/console/password")
	}
	wantRedirect(t, "forced: POST", b.post("/console/password", "/console/developers/keys",
		url.Values{"name": {"x"}, "preset": {"full-access"}}), "/console/password")
	form := func(n, c string) url.Values { return url.Values{"new": {n}, "confirm": {c}} }
	wantStatus(t, "mismatch", b.post("/console/password", "/console/password", form("a new password!", "another one!!")), http.StatusUnprocessableEntity)
	wantStatus(t, "too short", b.post("/console/password", "/console/password", form("short", "short")), http.StatusUnprocessableEntity)
	wantStatus(t, "same as one-time", b.post("/console/password", "/console/password", form(oneTime, oneTime)), http.StatusUnprocessableEntity)
	const chosen = "my own good password"
	wantRedirect(t, "change", b.post("/console/password", "/console/password", form(chosen, chosen)), "/console/")
	wantStatus(t, "after change", b.get("/console/developers"), http.StatusOK)

	// The one-time password is dead; the chosen one works.
	wantStatus(t, "one-time again", f.browser().signInRaw("ann@acme.example", oneTime), http.StatusUnauthorized)
	f.browser().signIn("ann@acme.example", chosen, "/console/")
	// A voluntary change asks for the current password.
	wantStatus(t, "voluntary without current", b.post("/console/password", "/console/password",
		url.Values{"current": {"nope"}, "new": {"another password"}, "confirm": {"another password"}}), http.StatusUnprocessableEntity)
}

func TestCreateKeyShowsCredentialOnce(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	ag := f.agent(a, "Helper")
	f.agent(a, "Other")
	b := f.signedIn(owner)

	// The POST answers 303 to a page that shows the credential once
	// (b.created checks the headers); a reload of that page does not.
	p, cred := b.created("/console/developers/keys/new", "/console/developers/keys", url.Values{
		"name": {"Billing sync"}, "description": {"nightly job"}, "preset": {"aiagent-query"}, "env": {"live"},
		"expiry": {"30"}, "agent": {ag.ID}, "scope": {"webhooks:manage"}, // a scope beyond the preset: Custom, with both
	})
	if !strings.Contains(p.body, "will not be shown again") {
		t.Fatal("no warning")
	}
	ks, _ := f.keys.List(context.Background(), a.ID)
	if len(ks) != 1 {
		t.Fatalf("%d keys", len(ks))
	}
	k := ks[0]
	if k.Name != "Billing sync" || k.Description != "nightly job" || strings.Join(scopeStrings(k.Scopes), ",") != "aiagents:read,aiagents:query,webhooks:manage" ||
		len(k.AgentIDs) != 1 || k.AgentIDs[0] != ag.ID || k.ExpiresAt == nil || k.CreatedBy != owner.ID {
		t.Fatalf("stored key: %+v", k)
	}
	if d := k.ExpiresAt.Sub(f.clock.Now()); d < 30*24*time.Hour-time.Minute || d > 30*24*time.Hour+time.Minute {
		t.Fatalf("expires in %v", d)
	}
	// Never again: not on its own page opened again (it leads to the key's
	// page), the list, the key's page, or the audit trail.
	again := b.get("/console/developers/keys/" + k.ID + "/created")
	if again.status != http.StatusSeeOther || again.header.Get("Location") != "/console/developers/keys/"+k.ID ||
		strings.Contains(again.body, cred[len(cred)-38:]) {
		t.Fatalf("the credential page again: %d to %q", again.status, again.header.Get("Location"))
	}
	for _, path := range []string{"/console/developers", "/console/developers/keys/" + k.ID, "/console/developers/audit"} {
		page := b.get(path)
		if strings.Contains(page.body, cred[len(cred)-38:]) {
			t.Fatalf("%s shows the credential", path)
		}
		if !strings.Contains(page.body, k.Prefix) {
			t.Fatalf("%s does not show the prefix", path)
		}
	}
	list := b.get("/console/developers")
	for _, want := range []string{"Billing sync", "nightly job", "aiagents:query", "Helper", owner.Email, "active", "120/min", "Never"} {
		if !strings.Contains(list.body, want) {
			t.Errorf("keys list lacks %q", want)
		}
	}
	if f.apiStatus(cred) != http.StatusOK {
		t.Fatal("the new key does not work")
	}
	checkCustomAndRefusedKeys(t, f, b, a)
}

// checkCustomAndRefusedKeys creates a custom test key, then posts forms
// with mistakes to fix: each refused, no key made or shown.
func checkCustomAndRefusedKeys(t *testing.T, f *fixture, b *browser, a domain.Account) {
	t.Helper()
	if _, c := b.created("/console/developers/keys/new", "/console/developers/keys", url.Values{
		"name": {"Custom"}, "preset": {"custom"}, "scope": {"staff:read", "aiagents:write"}, "env": {"test"}, "expiry": {"never"}}); !strings.HasPrefix(c, "agk_test_") {
		t.Fatalf("custom test key: %q", c)
	}
	for name, form := range map[string]url.Values{
		"no name":          {"name": {"  "}, "preset": {"full-access"}, "env": {"live"}},
		"custom no scopes": {"name": {"x"}, "preset": {"custom"}, "env": {"live"}},
		"unknown scope":    {"name": {"x"}, "preset": {"custom"}, "scope": {"root:all"}, "env": {"live"}},
		"unknown preset":   {"name": {"x"}, "preset": {"everything"}, "env": {"live"}},
		"past expiry":      {"name": {"x"}, "preset": {"full-access"}, "env": {"live"}, "expiry": {"custom"}, "expires_at": {"2001-01-01T00:00"}},
		"bad expiry date":  {"name": {"x"}, "preset": {"full-access"}, "env": {"live"}, "expiry": {"custom"}, "expires_at": {"soon"}},
		"bad env":          {"name": {"x"}, "preset": {"full-access"}, "env": {"prod"}},
	} {
		p := b.post("/console/developers/keys/new", "/console/developers/keys", form)
		wantStatus(t, name, p, http.StatusUnprocessableEntity)
		if credentialRE.MatchString(p.body) || !strings.Contains(p.body, "notice-error") {
			t.Fatalf("%s: a key was shown or no error", name)
		}
	}
	if ks, _ := f.keys.List(context.Background(), a.ID); len(ks) != 2 {
		t.Fatalf("%d keys after refused forms", len(ks))
	}
}

func TestRotateThenRevoke(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	old := f.key(a, owner, "prod")
	b := f.signedIn(owner)
	if f.apiStatus(old.Credential) != http.StatusOK {
		t.Fatal("old key")
	}
	if err := f.toucher.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	f.clock.Advance(time.Second) // ids and lists order by creation time
	p, cred := b.created("/console/developers/keys/"+old.Key.ID, "/console/developers/keys/"+old.Key.ID+"/rotate", nil)
	if cred == old.Credential {
		t.Fatal("no new credential")
	}
	if !strings.Contains(p.body, old.Key.Prefix) || !strings.Contains(p.body, `id="rotation"`) {
		t.Fatal("the rotation page does not show the old key beside the new")
	}
	// Both work; the old one's last use shows on its page beside the new key.
	if f.apiStatus(cred) != http.StatusOK || f.apiStatus(old.Credential) != http.StatusOK {
		t.Fatal("after rotation both keys must work")
	}
	if err := f.toucher.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	ks, _ := f.keys.List(context.Background(), a.ID)
	if len(ks) != 2 || ks[1].RotatedFrom != old.Key.ID || ks[1].Name != "prod (rotated "+f.clock.Now().UTC().Format("2006-01-02")+")" ||
		strings.Join(scopeStrings(ks[1].Scopes), ",") != "aiagents:read" {
		t.Fatalf("keys after rotation: %+v", ks)
	}
	keyPage := b.get("/console/developers/keys/" + old.Key.ID)
	if !strings.Contains(keyPage.body, `id="lineage"`) || !strings.Contains(keyPage.body, ks[1].Prefix) ||
		!strings.Contains(keyPage.body, formatUTC(*ks[0].LastUsedAt)) {
		t.Fatal("the old key's page does not show the rotation with last use")
	}
	checkRevokeAfterRotation(t, f, b, a, owner, old, cred, ks)
}

// checkRevokeAfterRotation revokes old, rotated into ks[1] (credential
// cred), and finds both on the audit trail, old's history and the list.
func checkRevokeAfterRotation(t *testing.T, f *fixture, b *browser, a domain.Account, owner domain.User, old keys.Created, cred string, ks []domain.APIKey) {
	t.Helper()
	f.clock.Advance(time.Second)
	confirm := b.get("/console/developers/keys/" + old.Key.ID + "/revoke")
	wantStatus(t, "revoke confirmation", confirm, http.StatusOK)
	if !strings.Contains(confirm.body, "Revoke this key?") {
		t.Fatal("no confirmation step")
	}
	wantRedirect(t, "revoke", b.post("/console/developers/keys/"+old.Key.ID+"/revoke", "/console/developers/keys/"+old.Key.ID+"/revoke", nil),
		"/console/developers/keys/"+old.Key.ID)
	if got := f.apiStatus(old.Credential); got != http.StatusUnauthorized {
		t.Fatalf("revoked key: %d", got)
	}
	if f.apiStatus(cred) != http.StatusOK {
		t.Fatal("the new key stopped working")
	}
	wantStatus(t, "rotate a revoked key", b.post("/console/developers", "/console/developers/keys/"+old.Key.ID+"/rotate", nil), http.StatusConflict)

	audit := b.get("/console/developers/audit")
	// Related keys show by name, linked, never as a raw id.
	for _, want := range []string{"created", "rotated", "revoked", owner.Email,
		`replaces <a href="/console/developers/keys/` + old.Key.ID + `"><bdi>prod</bdi></a>`} {
		if !strings.Contains(audit.body, want) {
			t.Errorf("audit trail lacks %q", want)
		}
	}
	events, _ := f.st.ListAuditEvents(context.Background(), a.ID, 0)
	if len(events) != 4 || events[0].Action != "revoked" || events[0].ActorID != owner.ID || events[1].Action != "rotated" || events[2].Action != "rotated" {
		t.Fatalf("stored events: %+v", events)
	}
	// The old key's own History shows its rotation.
	if history := b.get("/console/developers/keys/" + old.Key.ID); !strings.Contains(history.body,
		`replaced by <a href="/console/developers/keys/`+ks[1].ID+`"><bdi>`+ks[1].Name+`</bdi></a>`) || strings.Contains(history.body, "replaced by "+ks[1].ID) {
		t.Fatal("the old key's history does not show its rotation by name")
	}
	list := b.get("/console/developers")
	if !strings.Contains(list.body, "badge-revoked") || !strings.Contains(list.body, "badge-active") {
		t.Fatal("list does not show both statuses")
	}
	if !strings.Contains(list.body, `id="recent-events"`) || strings.Count(list.body, "badge-event") != 4 {
		t.Fatal("the Developers page does not show the recent audit events")
	}
}

func TestExpiredKeyStatusAndAudit(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	exp := f.clock.Now().Add(time.Hour)
	c, err := f.keys.Create(context.Background(), domainActor(owner), keysParams(a.ID, "short", &exp))
	if err != nil {
		t.Fatal(err)
	}
	f.secrets = append(f.secrets, c.Credential)
	f.clock.Advance(2 * time.Hour)
	if got := f.apiStatus(c.Credential); got != http.StatusUnauthorized {
		t.Fatalf("expired key: %d", got)
	}
	b := f.signedIn(owner)
	if !strings.Contains(b.get("/console/developers").body, "badge-expired") {
		t.Fatal("no expired status")
	}
	waitFor(t, func() bool { return strings.Contains(b.get("/console/developers/audit").body, "expired in use") })
}

func TestAgentsPagesAndInstructions(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	ag := f.agent(a, "Helper")
	ctx := context.Background()
	q := domain.Question{ID: domain.NewID(domain.PrefixQuestion, f.clock.Now()), AccountID: a.ID, AgentID: ag.ID,
		ConversationID: domain.NewID(domain.PrefixConvo, f.clock.Now()), Question: "Where is my order?",
		Answer: "It ships tomorrow.", CreatedAt: f.clock.Now(), AnswerMS: 321}
	if err := f.st.RecordQuestion(ctx, q, true, false); err != nil {
		t.Fatal(err)
	}
	b := f.signedIn(owner)
	list := b.get("/console/agents")
	for _, want := range []string{"Helper", "321 ms", "enabled"} {
		if !strings.Contains(list.body, want) {
			t.Errorf("agents list lacks %q", want)
		}
	}
	p := b.get("/console/agents/" + ag.ID)
	for _, want := range []string{"Where is my order?", "It ships tomorrow.", `name="instructions"`, "Be helpful."} {
		if !strings.Contains(p.body, want) {
			t.Errorf("agent page lacks %q", want)
		}
	}
	wantRedirect(t, "save", b.post("/console/agents/"+ag.ID, "/console/agents/"+ag.ID,
		url.Values{"instructions": {"Line one.\r\nLine two."}}), "/console/agents/"+ag.ID)
	got, _ := f.st.GetAgent(ctx, a.ID, ag.ID)
	if got.Instructions != "Line one.\nLine two." || !got.UpdatedAt.After(ag.UpdatedAt) {
		t.Fatalf("saved: %q, updated %v (was %v)", got.Instructions, got.UpdatedAt, ag.UpdatedAt)
	}
	// The API's limit, in code points: 10,000 are fine, 10,001 are not.
	wantRedirect(t, "10000", b.post("/console/agents/"+ag.ID, "/console/agents/"+ag.ID,
		url.Values{"instructions": {strings.Repeat("é", 10000)}}), "/console/agents/"+ag.ID)
	wantRedirect(t, "10000 four-byte code points", b.post("/console/agents/"+ag.ID, "/console/agents/"+ag.ID,
		url.Values{"instructions": {strings.Repeat("😀", 10000)}}), "/console/agents/"+ag.ID)
	wantRedirect(t, "10000 again", b.post("/console/agents/"+ag.ID, "/console/agents/"+ag.ID,
		url.Values{"instructions": {strings.Repeat("é", 10000)}}), "/console/agents/"+ag.ID)
	wantStatus(t, "10001", b.post("/console/agents/"+ag.ID, "/console/agents/"+ag.ID,
		url.Values{"instructions": {strings.Repeat("é", 10001)}}), http.StatusUnprocessableEntity)
	wantStatus(t, "control character", b.post("/console/agents/"+ag.ID, "/console/agents/"+ag.ID,
		url.Values{"instructions": {"bell\a"}}), http.StatusUnprocessableEntity)
	if got, _ := f.st.GetAgent(ctx, a.ID, ag.ID); got.Instructions != strings.Repeat("é", 10000) {
		t.Fatal("a refused edit was saved")
	}
	wantStatus(t, "unknown agent", b.get("/console/agents/agt_nope"), http.StatusNotFound)
}

func TestSigningInAgainEndsThePreviousSession(t *testing.T) {
	f := newFixture(t)
	_, owner := f.account("Acme")
	b := f.signedIn(owner)
	u, _ := url.Parse(f.srv.URL + "/console/")
	first := sessionToken(t, b, u)
	// A signed-in browser is sent away from the sign-in page, but may still
	// post the form (say, from a tab opened earlier): give it a form token.
	token := csrfOf(t, f.browser().get("/console/signin"))
	b.client.Jar.SetCookies(u, []*http.Cookie{{Name: "agentapi_signin", Value: token, Path: "/console/"}})
	p := b.do(http.MethodPost, "/console/signin", url.Values{"email": {owner.Email}, "password": {testPassword}, "csrf": {token}})
	wantRedirect(t, "second sign-in", p, "/console/")
	second := sessionToken(t, b, u)
	if first == second {
		t.Fatal("the session token was reused")
	}
	h := sha256.Sum256([]byte(first))
	if _, _, err := f.st.SessionUser(context.Background(), h[:], f.clock.Now()); err == nil {
		t.Fatal("the previous session survived a new sign-in")
	}
	wantStatus(t, "new session", b.get("/console/developers"), http.StatusOK)
}

func sessionToken(t *testing.T, b *browser, u *url.URL) string {
	t.Helper()
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == "agentapi_session" {
			b.f.secrets = append(b.f.secrets, c.Value)
			return c.Value
		}
	}
	t.Fatal("no session cookie")
	return ""
}
