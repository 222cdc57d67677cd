package console_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
)

// directSignIn posts the sign-in form straight to f's handler from addr and
// returns the status and the session cookie, if one was set.
func directSignIn(t *testing.T, f *fixture, email, pw, addr string, headers ...string) (int, *http.Cookie) {
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
	post.RemoteAddr = addr
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		post.Header.Add(name, strings.TrimSpace(value))
	}
	rec = httptest.NewRecorder()
	f.h.ServeHTTP(rec, post)
	for _, c := range rec.Result().Cookies() {
		if c.Name == "agentapi_session" && c.Value != "" {
			f.secrets = append(f.secrets, c.Value)
			return rec.Code, c
		}
	}
	return rec.Code, nil
}

func directGet(f *fixture, path string, session *http.Cookie) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.AddCookie(session)
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	return rec
}

// randomAddr is a client address no other test run has used, so windows
// left in the shared Redis database by earlier runs cannot interfere.
func randomAddr() string {
	return fmt.Sprintf("[2001:db8::%s]:4000", strings.ToLower(rand.Text()[:4]))
}

// TestTwoInstances runs two console instances (each with its own handler
// and Redis limiter client) on one PostgreSQL database and one Redis, as
// production does: a session made on one is honoured by the other, a
// deactivation on one ends the session on the other at once, and the
// sign-in throttle counts attempts on both (per (email, address) here; the
// device cookie's exemption from the per-email ceiling in
// TestDeviceCookieAcrossInstances).
func TestTwoInstances(t *testing.T) {
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
		return newFixtureOn(t, st, rl)
	}
	a, b := open(), open()
	acct, _ := a.account("Acme")
	// A unique email: throttle windows in Redis outlive the test.
	email := "owner-" + strings.ToLower(rand.Text()[:8]) + "@acme.example"
	u := a.user(acct, email, domain.RoleOwner)

	status, session := directSignIn(t, a, email, testPassword, randomAddr())
	if status != http.StatusSeeOther || session == nil {
		t.Fatalf("sign in on A: %d", status)
	}
	if rec := directGet(b, "/console/developers", session); rec.Code != http.StatusOK {
		t.Fatalf("A's session on B: %d", rec.Code)
	}
	if err := a.st.DeactivateUser(context.Background(), acct.ID, u.ID); err != nil {
		t.Fatal(err)
	}
	if rec := directGet(b, "/console/developers", session); rec.Code != http.StatusSeeOther ||
		!strings.HasPrefix(rec.Header().Get("Location"), "/console/signin") {
		t.Fatalf("deactivated on A, still served by B: %d", rec.Code)
	}

	// Ten failures from one address spread over both instances: the
	// (email, address) window is shared, so the 11th from that address is
	// refused on either instance.
	guesser := randomAddr()
	for i := range 10 {
		f := []*fixture{a, b}[i%2]
		if got, _ := directSignIn(t, f, email, "wrong password", guesser); got != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d", i+1, got)
		}
	}
	for name, f := range map[string]*fixture{"A": a, "B": b} {
		if got, _ := directSignIn(t, f, email, "wrong password", guesser); got != http.StatusTooManyRequests {
			t.Fatalf("11th attempt on %s: %d, want 429", name, got)
		}
	}
}

// TestCredentialShownOnAnotherInstance: the create's POST is answered by
// one instance and the page that shows the credential by another, as a
// balancer may do: the sealing key is a server secret both read from the
// one database, and so is the claim that shows it once.
func TestCredentialShownOnAnotherInstance(t *testing.T) {
	dsn := storetest.PostgresURL(t)
	open := func() *fixture {
		st, err := store.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return newFixtureOn(t, st, nil)
	}
	a, b := open(), open()
	acct, _ := a.account("Acme " + rand.Text()[:8])
	email := "owner-" + strings.ToLower(rand.Text()[:8]) + "@acme.example"
	a.user(acct, email, domain.RoleOwner)
	status, session := directSignIn(t, a, email, testPassword, randomAddr())
	if status != http.StatusSeeOther || session == nil {
		t.Fatalf("sign in on A: %d", status)
	}
	m := csrfRE.FindStringSubmatch(directGet(a, "/console/developers/keys/new", session).Body.String())
	if m == nil {
		t.Fatal("no create form")
	}
	form := url.Values{"name": {"billing"}, "preset": {"full-access"}, "env": {"live"}, "expiry": {"never"}, "csrf": {m[1]}}
	post := httptest.NewRequest(http.MethodPost, "/console/developers/keys", strings.NewReader(form.Encode()))
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	post.AddCookie(session)
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, post)
	loc := rec.Header().Get("Location")
	if rec.Code != http.StatusSeeOther || !strings.HasSuffix(loc, "/created") {
		t.Fatalf("create on A: %d to %q", rec.Code, loc)
	}
	var reveal *http.Cookie
	for _, c := range rec.Result().Cookies() {
		if c.Name == "agentapi_reveal" {
			reveal = c
		}
	}
	if reveal == nil || reveal.Path != loc || !reveal.HttpOnly || reveal.MaxAge <= 0 || reveal.MaxAge > 600 {
		t.Fatalf("reveal cookie: %+v", reveal)
	}
	get := httptest.NewRequest(http.MethodGet, loc, nil)
	get.AddCookie(session)
	get.AddCookie(reveal)
	rec = httptest.NewRecorder()
	b.h.ServeHTTP(rec, get)
	cred := credentialRE.FindString(rec.Body.String())
	if rec.Code != http.StatusOK || cred == "" {
		t.Fatalf("credential page on B: %d, credential %v", rec.Code, cred != "")
	}
	a.secrets = append(a.secrets, cred)
	b.secrets = append(b.secrets, cred)
	if a.apiStatus(cred) != http.StatusOK {
		t.Fatal("the credential shown on B does not work")
	}
	// The same cookie sent again, to the other instance: shown once.
	rec = httptest.NewRecorder()
	a.h.ServeHTTP(rec, get)
	if rec.Code != http.StatusSeeOther || credentialRE.MatchString(rec.Body.String()) {
		t.Fatalf("the reveal replayed on A: %d", rec.Code)
	}
}
