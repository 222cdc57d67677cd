package console_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/api"
	"github.com/agentapi/agentapi/internal/console"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/password"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
	"github.com/agentapi/agentapi/internal/usage"
	"golang.org/x/crypto/argon2"
)

// testPassword is every fixture user's password. Its hash is argon2id with
// cheap parameters (password.Verify reads them from the hash), so that
// tests may fail a sign-in a hundred times: with the real ones each check
// takes 19 MiB and tens of milliseconds (more under -race).
const testPassword = "correct horse battery"

var testHash = sync.OnceValue(func() string {
	salt := []byte("fixture salt 16b")
	key := argon2.IDKey([]byte(testPassword), salt, 1, 64, 1, 32)
	b64 := base64.RawStdEncoding
	h := fmt.Sprintf("$argon2id$v=%d$m=64,t=1,p=1$%s$%s", argon2.Version, b64.EncodeToString(salt), b64.EncodeToString(key))
	if ok, err := password.Verify(h, testPassword); !ok || err != nil {
		panic(fmt.Sprintf("fixture hash does not verify: %v", err))
	}
	return h
})

// clock is a test's time: it moves only when told to.
type clock = testenv.Clock

type syncBuffer = testenv.SyncBuffer

// fixture is the whole served handler (API and console, as serve mounts
// them) on a real SQLite store, over a loopback server, with a fake clock.
type fixture struct {
	t       *testing.T
	st      *store.Store
	srv     *httptest.Server
	h       http.Handler
	clock   *clock
	keys    *keys.Service
	toucher *keys.Toucher
	usage   *usage.Recorder // flushed by hand (usage_test.go)
	logs    *syncBuffer
	secrets []string // every credential and password the test saw, never to be logged
}

func newFixture(t *testing.T, opts ...func(*console.Config)) *fixture {
	t.Helper()
	return newFixtureOn(t, storetest.Open(t, store.EngineSQLite), nil, opts...)
}

// newFixtureOn serves st; lim, when not nil, is the limiter (else one in
// memory on the fixture's clock).
func newFixtureOn(t *testing.T, st *store.Store, lim ratelimit.Limiter, opts ...func(*console.Config)) *fixture {
	t.Helper()
	c := testenv.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	var mem ratelimit.Limiter = lim
	if lim == nil {
		m := ratelimit.NewMemory(c.Now)
		t.Cleanup(m.Close)
		mem = m
	}
	toucher := keys.NewToucher(st.TouchKeys, log, time.Second)
	cursorKey, err := st.Secret(context.Background(), "cursor")
	if err != nil {
		t.Fatal(err)
	}
	ks := keys.New(st, c.Now)
	cfg := console.Config{Store: st, Keys: ks, Limiter: mem, Log: log, Now: c.Now}
	for _, o := range opts {
		o(&cfg)
	}
	cons := console.New(cfg)
	rec := usage.New(st, log, usage.Options{})
	h, err := api.New(api.Config{Usage: rec,
		Store: st, Limiter: mem, UnauthLimiter: mem, UnauthRateLimit: 10000,
		Toucher: toucher, Log: log, Now: c.Now, CursorKey: cursorKey, Console: cons,
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, st: st, h: h, clock: c, keys: ks, toucher: toucher, usage: rec, logs: logs}
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	t.Cleanup(func() {
		logs := f.logs.String()
		for _, s := range f.secrets {
			if strings.Contains(logs, s) {
				t.Errorf("a secret (%d characters) reached the log", len(s))
			}
		}
		if strings.Contains(logs, testPassword) {
			t.Error("a password reached the log")
		}
	})
	return f
}

// account creates an account with an Owner; it returns both.
func (f *fixture) account(name string) (domain.Account, domain.User) {
	f.t.Helper()
	now := f.clock.Now()
	a := domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: name, Active: true, CreatedAt: now}
	if err := f.st.CreateAccount(context.Background(), a); err != nil {
		f.t.Fatal(err)
	}
	return a, f.user(a, "owner@"+strings.ToLower(name)+".example", domain.RoleOwner)
}

func (f *fixture) user(a domain.Account, email string, role domain.Role) domain.User {
	f.t.Helper()
	now := f.clock.Now()
	u := domain.User{ID: domain.NewID(domain.PrefixUser, now), AccountID: a.ID, Email: email, Role: role,
		PasswordHash: testHash(), Active: true, CreatedAt: now}
	if err := f.st.CreateUser(context.Background(), u); err != nil {
		f.t.Fatal(err)
	}
	return u
}

func (f *fixture) agent(a domain.Account, name string) domain.Agent {
	f.t.Helper()
	now := f.clock.Now()
	ag := domain.Agent{ID: domain.NewID(domain.PrefixAgent, now), AccountID: a.ID, Name: name,
		Instructions: "Be helpful.", Enabled: true, CreatedAt: now, UpdatedAt: now}
	if err := f.st.CreateAgent(context.Background(), ag); err != nil {
		f.t.Fatal(err)
	}
	return ag
}

func (f *fixture) key(a domain.Account, by domain.User, name string) keys.Created {
	f.t.Helper()
	c, err := f.keys.Create(context.Background(), keys.Actor{User: &by},
		keys.CreateParams{AccountID: a.ID, Name: name, Scopes: []domain.Scope{domain.ScopeAgentsRead}})
	if err != nil {
		f.t.Fatal(err)
	}
	f.secrets = append(f.secrets, c.Credential)
	return c
}

// browser is one user agent: its own cookie jar, redirects not followed so
// tests see them.
type browser struct {
	f      *fixture
	client *http.Client
	header http.Header // added to every request
}

// signedIn is a browser signed in as u (with testPassword), on /console/.
func (f *fixture) signedIn(u domain.User) *browser {
	f.t.Helper()
	b := f.browser()
	b.signIn(u.Email, testPassword, "/console/")
	return b
}

func (f *fixture) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{f: f, header: http.Header{}, client: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

type page struct {
	path   string // requested
	status int
	header http.Header
	body   string
}

func (b *browser) do(method, path string, form url.Values) page {
	b.f.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.f.srv.URL+path, body)
	if err != nil {
		b.f.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range b.header {
		req.Header[k] = v
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.f.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.f.t.Fatal(err)
	}
	return page{path: path, status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

func (b *browser) get(path string) page { b.f.t.Helper(); return b.do(http.MethodGet, path, nil) }

// post submits a form with the CSRF token read from the page at from.
func (b *browser) post(from, path string, form url.Values) page {
	b.f.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", csrfOf(b.f.t, b.get(from)))
	return b.do(http.MethodPost, path, form)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, p page) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF token on the page (status %d):\n%s", p.status, p.body)
	}
	return m[1]
}

// signIn signs in and expects to land on want (a path prefix).
func (b *browser) signIn(email, pw, want string) {
	b.f.t.Helper()
	p := b.signInRaw(email, pw)
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), want) {
		b.f.t.Fatalf("sign in as %s: status %d, Location %q, want 303 to %s\n%s", email, p.status, p.header.Get("Location"), want, p.body)
	}
}

func (b *browser) signInRaw(email, pw string) page {
	b.f.t.Helper()
	return b.post("/console/signin", "/console/signin", url.Values{"email": {email}, "password": {pw}})
}

// created posts a create or rotation form and follows its redirect to the
// page that shows the new credential once; it returns that page and the
// credential, which it adds to the secrets the log must not hold. The POST
// must answer 303 with neither the credential in its Location nor any
// unsealed in a cookie.
func (b *browser) created(from, path string, form url.Values) (page, string) {
	b.f.t.Helper()
	p := b.post(from, path, form)
	wantRedirect(b.f.t, "POST "+path, p, "/console/developers/keys/")
	loc := p.header.Get("Location")
	if !regexp.MustCompile(`^/console/developers/keys/key_[0-9A-Za-z]+/created$`).MatchString(loc) {
		b.f.t.Fatalf("POST %s: Location %q", path, loc)
	}
	shown := b.get(loc)
	wantStatus(b.f.t, "GET "+loc, shown, http.StatusOK)
	cred := credentialRE.FindString(shown.body)
	if cred == "" {
		b.f.t.Fatalf("no credential on %s:\n%s", loc, shown.body)
	}
	b.f.secrets = append(b.f.secrets, cred)
	secret := cred[len(cred)-38:]
	for _, h := range []string{"Location", "Set-Cookie"} {
		for _, v := range append(p.header.Values(h), shown.header.Values(h)...) {
			if strings.Contains(v, secret) {
				b.f.t.Fatalf("the credential is in a %s header: %q", h, v)
			}
		}
	}
	if shown.header.Get("Cache-Control") != "no-store" {
		b.f.t.Fatalf("credential page: Cache-Control %q", shown.header.Get("Cache-Control"))
	}
	return shown, cred
}

func wantStatus(t *testing.T, what string, p page, status int) {
	t.Helper()
	if p.status != status {
		t.Fatalf("%s: status %d, want %d\n%s", what, p.status, status, p.body)
	}
}

func wantRedirect(t *testing.T, what string, p page, prefix string) {
	t.Helper()
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), prefix) {
		t.Fatalf("%s: status %d, Location %q, want 303 to %s\n%s", what, p.status, p.header.Get("Location"), prefix, p.body)
	}
}

// wantHolds stops the test unless body, what's, holds every one of want
// and none of not.
func wantHolds(t *testing.T, what, body string, want, not []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Fatalf("%s lacks %q:\n%s", what, w, body)
		}
	}
	for _, n := range not {
		if strings.Contains(body, n) {
			t.Fatalf("%s holds %q:\n%s", what, n, body)
		}
	}
}

// apiStatus calls GET /v1/me with a credential.
func (f *fixture) apiStatus(cred string) int {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

var credentialRE = regexp.MustCompile(`agk_(live|test)_[0-9a-z]{12}_[0-9A-Za-z]{38}`)

func regexpFind(expr, s string) string {
	m := regexp.MustCompile(expr).FindStringSubmatch(s)
	if m == nil {
		return ""
	}
	return m[1]
}

func scopeStrings(list []domain.Scope) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = string(s)
	}
	return out
}

// formatUTC is how a page marks up a time.
func formatUTC(t time.Time) string { return `datetime="` + t.UTC().Format(time.RFC3339) + `"` }

func domainActor(u domain.User) keys.Actor { return keys.Actor{User: &u} }

func keysParams(accountID, name string, expires *time.Time) keys.CreateParams {
	return keys.CreateParams{AccountID: accountID, Name: name, Scopes: []domain.Scope{domain.ScopeAgentsRead}, ExpiresAt: expires}
}

// waitFor polls cond for up to five seconds (for work the server does after
// answering, such as an audit write).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
