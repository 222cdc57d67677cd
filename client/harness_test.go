package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/client"
	"github.com/agentapi/agentapi/internal/api"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
)

// These tests run the client against the real /v1 handler stack
// (internal/api on a SQLite store), and against fault-injecting servers
// for what the real one does not do on demand (5xx, dropped connections).

// clock is a test's time: it moves only when told to.
type clock = testenv.Clock

type syncBuffer = testenv.SyncBuffer

// apiServer is the real API served over loopback HTTP.
type apiServer struct {
	URL     string // base URL ending in /v1
	st      *store.Store
	keys    *keys.Service
	account domain.Account
	owner   domain.User
	logs    *syncBuffer
	now     func() time.Time
	close   func()
	mu      sync.Mutex
	issued  []string
}

// startAPI serves the real handler on st. It takes no *testing.T so that
// TestMain can start the server the examples use.
func startAPI(st *store.Store, now func() time.Time, mods ...func(*api.Config)) (*apiServer, error) {
	ctx := context.Background()
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	mem := ratelimit.NewMemory(now)
	cursorKey, err := st.Secret(ctx, "cursor")
	if err != nil {
		mem.Close()
		return nil, err
	}
	cfg := api.Config{
		Store: st, Limiter: mem, UnauthLimiter: mem, UnauthRateLimit: 1000,
		Toucher: keys.NewToucher(st.TouchKeys, log, time.Second), Log: log, Now: now, CursorKey: cursorKey,
	}
	for _, m := range mods {
		m(&cfg)
	}
	h, err := api.New(cfg)
	if err != nil {
		mem.Close()
		return nil, err
	}
	hs := httptest.NewServer(h)
	s := &apiServer{URL: hs.URL + "/v1", st: st, keys: keys.New(st, now), logs: logs, now: now,
		close: func() { hs.Close(); mem.Close() }}
	s.account, s.owner, err = s.newAccount("Acme")
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *apiServer) newAccount(name string) (domain.Account, domain.User, error) {
	ctx := context.Background()
	now := s.now()
	a := domain.Account{ID: domain.NewID(domain.PrefixAccount, now), Name: name, Active: true, CreatedAt: now}
	if err := s.st.CreateAccount(ctx, a); err != nil {
		return a, domain.User{}, err
	}
	u := domain.User{
		ID: domain.NewID(domain.PrefixUser, now), AccountID: a.ID, Email: strings.ToLower(name) + "-" + a.ID[len(a.ID)-6:] + "@example.com",
		Role: domain.RoleOwner, PasswordHash: "x", Active: true, CreatedAt: now,
	}
	return a, u, s.st.CreateUser(ctx, u)
}

// mint creates a key in account a.
func (s *apiServer) mint(a domain.Account, owner domain.User, mod func(*keys.CreateParams), scopes ...domain.Scope) (keys.Created, error) {
	p := keys.CreateParams{AccountID: a.ID, Name: "client test", Scopes: scopes}
	if mod != nil {
		mod(&p)
	}
	c, err := s.keys.Create(context.Background(), keys.Actor{User: &owner}, p)
	if err == nil {
		s.mu.Lock()
		s.issued = append(s.issued, c.Credential)
		s.mu.Unlock()
	}
	return c, err
}

// fixture is a test's real server with a fake clock.
type fixture struct {
	t *testing.T
	*apiServer
	clock *clock
}

var allScopes = []domain.Scope{domain.ScopeAgentsRead, domain.ScopeAgentsWrite, domain.ScopeAgentsQuery}

func newFixture(t *testing.T, mods ...func(*api.Config)) *fixture {
	t.Helper()
	c := testenv.NewClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	s, err := startAPI(storetest.Open(t, store.EngineSQLite), c.Now, mods...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	// No credential may reach the server's log, whatever the client did.
	t.Cleanup(func() {
		logs := s.logs.String()
		for _, cred := range s.issued {
			if strings.Contains(logs, cred[len(cred)-38:]) {
				t.Errorf("a credential (prefix %s) reached the server log", cred[9:21])
			}
		}
	})
	return &fixture{t: t, apiServer: s, clock: c}
}

// key mints a key in the fixture's account.
func (f *fixture) key(mod func(*keys.CreateParams), scopes ...domain.Scope) keys.Created {
	f.t.Helper()
	c, err := f.mint(f.account, f.owner, mod, scopes...)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// counter counts the requests a client sends.
type counter struct {
	mu   sync.Mutex
	n    int
	next http.RoundTripper
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// sleeper is a fake wait: it records each duration and moves the server's
// clock by it, as a real wait would.
type sleeper struct {
	mu     sync.Mutex
	clock  *clock
	sleeps []time.Duration
}

func (s *sleeper) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	s.sleeps = append(s.sleeps, d)
	s.mu.Unlock()
	if s.clock != nil {
		s.clock.Advance(d)
	}
	return nil
}

func (s *sleeper) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.sleeps...)
}

// tclient is a client on the fixture with a counting transport and a fake
// sleeper tied to the fixture's clock.
type tclient struct {
	*client.Client
	requests *counter
	sleeper  *sleeper
}

func (f *fixture) client(key string, opts ...client.Option) tclient {
	f.t.Helper()
	return newTClient(f.t, f.URL, key, f.clock, opts...)
}

func newTClient(t *testing.T, base, key string, c *clock, opts ...client.Option) tclient {
	t.Helper()
	cnt := &counter{next: http.DefaultTransport}
	sl := &sleeper{clock: c}
	all := append([]client.Option{client.WithHTTPClient(&http.Client{Transport: cnt}), client.WithSleep(sl.sleep)}, opts...)
	cl, err := client.New(base, key, all...)
	if err != nil {
		t.Fatal(err)
	}
	return tclient{Client: cl, requests: cnt, sleeper: sl}
}

// wantAPIError asserts err is an *Error with the status, code and
// (field:code) entries given.
func wantAPIError(t *testing.T, err error, status int, code string, fields ...string) *client.Error {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *client.Error %d %s", err, err, status, code)
	}
	if e.StatusCode != status || e.Code != code {
		t.Fatalf("error %d %s, want %d %s: %v", e.StatusCode, e.Code, status, code, e)
	}
	if !client.IsCode(err, code) {
		t.Fatalf("IsCode(err, %q) is false", code)
	}
	var got []string
	for _, fe := range e.Errors {
		if fe.Message == "" {
			t.Fatalf("field error without message: %+v", fe)
		}
		got = append(got, fe.Field+":"+fe.Code)
	}
	if strings.Join(got, ",") != strings.Join(fields, ",") {
		t.Fatalf("errors %v, want %v", got, fields)
	}
	if e.Message == "" {
		t.Fatalf("empty message: %+v", e)
	}
	return e
}
