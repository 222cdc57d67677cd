package console_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/console"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/password"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
	"github.com/redis/go-redis/v9"
)

// signInAt posts the sign-in form from addr with the given cookies (besides
// the form's own) and returns the status and the device cookie set, if any.
func signInAt(t *testing.T, f *fixture, email, pw, addr string, cookies ...*http.Cookie) (int, *http.Cookie) {
	t.Helper()
	get := httptest.NewRequest(http.MethodGet, "/console/signin", nil)
	get.RemoteAddr = addr
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, get)
	m := csrfRE.FindStringSubmatch(rec.Body.String())
	if m == nil {
		t.Fatalf("no sign-in form: %d", rec.Code)
	}
	form := url.Values{"email": {email}, "password": {pw}, "csrf": {m[1]}}
	post := httptest.NewRequest(http.MethodPost, "/console/signin", strings.NewReader(form.Encode()))
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	post.AddCookie(&http.Cookie{Name: "agentapi_signin", Value: m[1]})
	for _, c := range cookies {
		post.AddCookie(c)
	}
	post.RemoteAddr = addr
	rec = httptest.NewRecorder()
	f.h.ServeHTTP(rec, post)
	var device *http.Cookie
	for _, c := range rec.Result().Cookies() {
		switch c.Name {
		case "agentapi_session":
			f.secrets = append(f.secrets, c.Value)
		case "agentapi_device":
			device = c
		}
	}
	return rec.Code, device
}

// attack fails n sign-ins on email, spread over addresses so that no
// per-address or per-(email, address) ceiling is reached.
func attack(t *testing.T, f *fixture, email string, n int) {
	t.Helper()
	for i := range n {
		addr := fmt.Sprintf("198.51.100.%d:4000", 1+i/5)
		if code, _ := signInAt(t, f, email, "wrong password", addr); code != http.StatusUnauthorized {
			t.Fatalf("failure %d from %s: %d", i+1, addr, code)
		}
	}
}

// TestDeviceCookieExemptsFromEmailCeiling: 100 failures a minute on an
// email from many addresses stop sign-ins to it from a browser without its
// device cookie, but not the browser the user signed in with before; a
// tampered, foreign, expired or other email's cookie does not pass.
func TestDeviceCookieExemptsFromEmailCeiling(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	other := f.user(a, "admin@acme.example", domain.RoleAdmin)

	code, device := signInAt(t, f, owner.Email, testPassword, "203.0.113.1:1")
	if code != http.StatusSeeOther || device == nil {
		t.Fatalf("sign-in: %d, device cookie %v", code, device)
	}
	if !device.HttpOnly || device.MaxAge < 364*24*3600 || device.Path != "/console/" ||
		strings.Contains(device.Value, testPassword) {
		t.Fatalf("device cookie: %+v", device)
	}
	_, otherDevice := signInAt(t, f, other.Email, testPassword, "203.0.113.1:1")
	tampered := *device
	tampered.Value = device.Value[:len(device.Value)-2] + flip(device.Value[len(device.Value)-2:])
	forgedEmail := *otherDevice // the other user's signature, with the owner's email
	parts := strings.Split(otherDevice.Value, ".")
	forgedEmail.Value = parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(owner.Email)) + "." + parts[2]

	f.clock.Advance(61 * time.Second) // the sign-ins above are out of every window
	attack(t, f, owner.Email, 100)
	fresh := "192.0.2.50:1"
	if code, _ := signInAt(t, f, owner.Email, testPassword, fresh); code != http.StatusTooManyRequests {
		t.Fatalf("after 100 failures, without a device cookie: %d, want 429", code)
	}
	for name, ck := range map[string]*http.Cookie{"tampered": &tampered, "another email's": otherDevice, "re-addressed": &forgedEmail} {
		if code, _ := signInAt(t, f, owner.Email, testPassword, fresh, ck); code != http.StatusTooManyRequests {
			t.Errorf("%s device cookie: %d, want 429", name, code)
		}
	}
	if code, _ := signInAt(t, f, owner.Email, testPassword, fresh, device); code != http.StatusSeeOther {
		t.Fatalf("with the owner's device cookie: %d, want 303", code)
	}
	// A guesser holding a device cookie for the email (they would need the
	// password to get one) still has only their address's budgets.
	for range 10 {
		signInAt(t, f, owner.Email, "wrong password", "192.0.2.60:1", device)
	}
	if code, _ := signInAt(t, f, owner.Email, testPassword, "192.0.2.60:1", device); code != http.StatusTooManyRequests {
		t.Fatalf("device cookie past the (email, address) ceiling: %d, want 429", code)
	}

	// A year on, the cookie has expired.
	f.clock.Advance(366 * 24 * time.Hour)
	attack(t, f, owner.Email, 100)
	if code, _ := signInAt(t, f, owner.Email, testPassword, fresh, device); code != http.StatusTooManyRequests {
		t.Fatalf("expired device cookie: %d, want 429", code)
	}
}

func flip(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
	}
	return string(b)
}

// TestDeviceCookieAcrossInstances: a device cookie one instance set is
// honoured by another (the key is a server secret in the shared store),
// and the per-email ceiling counts failures on both.
func TestDeviceCookieAcrossInstances(t *testing.T) {
	dsn := storetest.PostgresURL(t)
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	open := func() *fixture {
		st, err := store.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		rc := redis.NewClient(opts)
		t.Cleanup(func() { rc.Close() })
		mem := ratelimit.NewMemory(nil)
		t.Cleanup(mem.Close)
		rl := ratelimit.NewRedis(rc, mem, nil)
		t.Cleanup(rl.Close)
		// A small per-email ceiling: windows in Redis run on the real clock.
		return newFixtureOn(t, st, rl, func(c *console.Config) { c.SignInLimits.PerEmail = 12 })
	}
	a, b := open(), open()
	acct, _ := a.account("Acme")
	// A unique email: throttle windows in Redis outlive the test.
	email := "owner-" + strings.ToLower(rand.Text()[:8]) + "@acme.example"
	a.user(acct, email, domain.RoleOwner)

	code, device := signInAt(t, a, email, testPassword, randomAddr())
	if code != http.StatusSeeOther || device == nil {
		t.Fatalf("sign-in on A: %d", code)
	}
	for i := range 11 { // 12 attempts on the email with the one above
		f := []*fixture{a, b}[i%2]
		if code, _ := signInAt(t, f, email, "wrong password", randomAddr()); code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i+1, code)
		}
	}
	for name, f := range map[string]*fixture{"A": a, "B": b} {
		if code, _ := signInAt(t, f, email, testPassword, randomAddr()); code != http.StatusTooManyRequests {
			t.Fatalf("without a device cookie on %s: %d, want 429", name, code)
		}
		if code, _ := signInAt(t, f, email, testPassword, randomAddr(), device); code != http.StatusSeeOther {
			t.Fatalf("with A's device cookie on %s: %d, want 303", name, code)
		}
	}
}

// TestPasswordGateBusy: when every password-hashing slot stays taken, a
// sign-in (known email or not) waits the Gate's wait, then gets 503 with
// Retry-After and the decided message; so do the Password page and an
// invitation. Once a slot frees, everything works again.
func TestPasswordGateBusy(t *testing.T) {
	const slots, wait = 2, 100 * time.Millisecond
	gate := password.NewGate(slots, wait)
	f := newFixture(t, func(c *console.Config) { c.Passwords = gate })
	_, owner := f.account("Acme")
	b := f.browser()
	b.signIn(owner.Email, testPassword, "/console/")

	// Take every slot.
	var held, holders sync.WaitGroup
	release := make(chan struct{})
	held.Add(slots)
	for range slots {
		holders.Go(func() {
			if err := gate.Do(context.Background(), func() { held.Done(); <-release }); err != nil {
				t.Error(err)
				held.Done()
			}
		})
	}
	held.Wait()

	const callers = 6
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			email := owner.Email
			if i%2 == 1 {
				email = fmt.Sprintf("nobody%d@acme.example", i) // unknown: the same gate
			}
			start := time.Now()
			p := f.browser().signInRaw(email, testPassword)
			if elapsed := time.Since(start); elapsed < wait {
				t.Errorf("%s refused after %v, before the wait of %v", email, elapsed, wait)
			}
			if p.status != http.StatusServiceUnavailable || p.header.Get("Retry-After") == "" ||
				!strings.Contains(p.body, "Too many sign-in attempts; try again shortly.") {
				t.Errorf("%s with no free slot: %d, Retry-After %q", email, p.status, p.header.Get("Retry-After"))
			}
		})
	}
	wg.Wait()
	change := url.Values{"current": {testPassword}, "new": {"a brand new password"}, "confirm": {"a brand new password"}}
	p := b.post("/console/password", "/console/password", change)
	wantStatus(t, "password change with no free slot", p, http.StatusServiceUnavailable)
	p = b.post("/console/users", "/console/users", url.Values{"email": {"ann@acme.example"}, "role": {"admin"}})
	wantStatus(t, "invitation with no free slot", p, http.StatusServiceUnavailable)
	if !strings.Contains(p.body, "The server is busy; try again shortly.") {
		t.Fatal("no busy message on the invitation")
	}

	close(release)
	holders.Wait()
	f.browser().signIn(owner.Email, testPassword, "/console/")
	wantRedirect(t, "password change", b.post("/console/password", "/console/password", change), "/console/")
}

// TestCredentialPageAddressesReload: creating or rotating a key answers
// 303 to a page that shows the credential once (redirect after POST), so a
// reload neither makes another key nor shows the credential again; the
// addresses the forms post to answer a GET with the page of what they make.
// checkReloads reloads key id's credential page (of what made it, name)
// twice: each time it leads to the key's page, neither showing cred.
func checkReloads(t *testing.T, b *browser, name, id, cred string) {
	t.Helper()
	for range 2 {
		p := b.get("/console/developers/keys/" + id + "/created")
		if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/developers/keys/"+id ||
			strings.Contains(p.body, cred) {
			t.Fatalf("%s: reload: %d to %q", name, p.status, p.header.Get("Location"))
		}
		if landing := b.get(p.header.Get("Location")); landing.status != http.StatusOK || credentialRE.MatchString(landing.body) {
			t.Fatalf("%s: the key's page: %d, or it shows a credential", name, landing.status)
		}
	}
}

func TestCredentialPageAddressesReload(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	old := f.key(a, owner, "prod")
	b := f.browser()
	b.signIn(owner.Email, testPassword, "/console/")

	for name, post := range map[string][2]string{
		"create": {"/console/developers/keys/new", "/console/developers/keys"},
		"rotate": {"/console/developers/keys/" + old.Key.ID, "/console/developers/keys/" + old.Key.ID + "/rotate"},
	} {
		form := url.Values{"name": {"Billing sync"}, "preset": {"full-access"}, "env": {"live"}, "expiry": {"never"}}
		shown, cred := b.created(post[0], post[1], form)
		if name == "rotate" && !strings.Contains(shown.body, `id="rotation"`) {
			t.Fatal("the rotation's credential page does not show the old key beside the new")
		}
		checkReloads(t, b, name, regexpFind(`^/console/developers/keys/([^/]+)/created$`, shown.path), cred)
	}
	if ks, _ := f.keys.List(context.Background(), a.ID); len(ks) != 3 {
		t.Fatalf("%d keys, want 3: reloads made keys", len(ks))
	}

	for path, target := range map[string]string{
		"/console/developers/keys": "/console/developers",
	} {
		p := b.get(path)
		if p.status != http.StatusSeeOther || p.header.Get("Location") != target {
			t.Fatalf("GET %s: %d to %q, want 303 to %s", path, p.status, p.header.Get("Location"), target)
		}
	}
	// Signed out, the same addresses go to sign-in, like every page.
	for _, path := range []string{"/console/developers/keys", "/console/developers/keys/" + old.Key.ID + "/created"} {
		if p := f.browser().get(path); p.status != http.StatusSeeOther ||
			!strings.HasPrefix(p.header.Get("Location"), "/console/signin") {
			t.Fatalf("signed out, %s: %d to %q", path, p.status, p.header.Get("Location"))
		}
	}
}

// TestRevealCookieIsBoundAndShortLived: the sealed credential opens only
// for the session that made the key, for revealTTL (10 minutes).
func TestRevealCookieIsBoundAndShortLived(t *testing.T) {
	f := newFixture(t)
	_, owner := f.account("Acme")
	b, thief := f.browser(), f.browser()
	b.signIn(owner.Email, testPassword, "/console/")
	thief.signIn(owner.Email, testPassword, "/console/") // the same user, another session

	create := func(name string) (string, *http.Cookie) {
		t.Helper()
		p := b.post("/console/developers/keys/new", "/console/developers/keys",
			url.Values{"name": {name}, "preset": {"full-access"}, "env": {"live"}, "expiry": {"never"}})
		wantRedirect(t, "create "+name, p, "/console/developers/keys/")
		loc := p.header.Get("Location")
		u, _ := url.Parse(f.srv.URL + loc)
		for _, c := range b.client.Jar.Cookies(u) {
			if c.Name == "agentapi_reveal" {
				return loc, c
			}
		}
		t.Fatalf("no reveal cookie for %s", loc)
		return "", nil
	}

	// Another session presenting the cookie sees no credential, and does
	// not spend it.
	loc, ck := create("one")
	u, _ := url.Parse(f.srv.URL + loc)
	thief.client.Jar.SetCookies(u, []*http.Cookie{{Name: ck.Name, Value: ck.Value, Path: loc}})
	if p := thief.get(loc); p.status != http.StatusSeeOther || credentialRE.MatchString(p.body) {
		t.Fatalf("another session: %d, or the credential", p.status)
	}
	p := b.get(loc)
	wantStatus(t, "the session that made it", p, http.StatusOK)
	f.secrets = append(f.secrets, credentialRE.FindString(p.body))

	// After ten minutes it is gone.
	loc, _ = create("two")
	f.clock.Advance(10 * time.Minute)
	if p := b.get(loc); p.status != http.StatusSeeOther || credentialRE.MatchString(p.body) {
		t.Fatalf("after 10 minutes: %d, or the credential", p.status)
	}
}

// TestAgentPageShowsLastQuestion: the agent's page shows when it was last
// asked, as the list does ("Never" before any question).
func TestAgentPageShowsLastQuestion(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	ag := f.agent(a, "Helper")
	b := f.browser()
	b.signIn(owner.Email, testPassword, "/console/")
	lastQuestion := regexp.MustCompile(`(?s)id="last-question">(.*?)</div>`)
	p := b.get("/console/agents/" + ag.ID)
	if m := lastQuestion.FindStringSubmatch(p.body); m == nil || !strings.Contains(m[1], "Never") || !strings.Contains(m[1], "last question") {
		t.Fatalf("no last question before any:\n%s", p.body)
	}
	f.clock.Advance(time.Minute)
	at := f.clock.Now()
	if err := f.st.RecordQuestion(context.Background(), domain.Question{
		ID: domain.NewID(domain.PrefixQuestion, at), AccountID: a.ID, AgentID: ag.ID,
		ConversationID: domain.NewID(domain.PrefixConvo, at), Question: "Where is my order?",
		Answer: "On its way.", CreatedAt: at, AnswerMS: 120,
	}, true, false); err != nil {
		t.Fatal(err)
	}
	p = b.get("/console/agents/" + ag.ID)
	if m := lastQuestion.FindStringSubmatch(p.body); m == nil || !strings.Contains(m[1], formatUTC(at)) {
		t.Fatalf("last question not shown as %s", formatUTC(at))
	}
}

// TestRevokeAsksInADialogToo: the revocation form, besides being its own
// confirmation page, asks again in a dialog when scripts run (console.js
// opens one for every form[data-confirm]); the browser test sees it open.
func TestRevokeAsksInADialogToo(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k := f.key(a, owner, "prod")
	b := f.browser()
	b.signIn(owner.Email, testPassword, "/console/")
	p := b.get("/console/developers/keys/" + k.Key.ID + "/revoke")
	form := regexp.MustCompile(`<form [^>]*action="/console/developers/keys/` + k.Key.ID + `/revoke"[^>]*>`).FindString(p.body)
	if !strings.Contains(form, `data-confirm="Revoke `+"\u2068prod\u2069"+` (`+k.Key.Prefix+`)?`) {
		t.Fatalf("the revocation form asks for no confirmation: %s", form)
	}
}
