package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/bodybudget"
	"github.com/agentapi/agentapi/internal/console"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
)

// countingBody counts the bytes the server read of a request body.
type countingBody struct {
	r    io.Reader
	read *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (countingBody) Close() error { return nil }

// manyFields is a urlencoded form of n fields besides extra.
func manyFields(n int, extra url.Values) string {
	var b strings.Builder
	b.WriteString(extra.Encode())
	for i := range n {
		b.WriteString("&f" + strconv.Itoa(i) + "=" + strings.Repeat("x", 16))
	}
	return b.String()
}

// signInPost is a sign-in POST from addr, with a valid double-submit token,
// whose body the server's reads are counted in read.
func signInPost(addr, body string, read *atomic.Int64) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/console/signin", nil)
	r.Body = countingBody{strings.NewReader(body), read}
	r.ContentLength = int64(len(body))
	r.RemoteAddr = addr + ":4000"
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.AddCookie(&http.Cookie{Name: "agentapi_signin", Value: "token"})
	return r
}

// TestSignInFormBounded: the sign-in form is read only after the client
// address's throttle, within 8 KiB and 8 fields. A body of 10,000 fields
// (259 KB) is refused 413 before any of it is read; so is a small body of
// too many fields, before it is parsed; and an attempt past the address's
// ceiling reads nothing. Before, each was parsed whole into two maps, then
// held while it waited for a password-hashing slot.
func TestSignInFormBounded(t *testing.T) {
	f := newFixture(t, func(c *console.Config) { c.SignInLimits.PerAddress = 3 })
	creds := url.Values{"csrf": {"token"}, "email": {"nobody@example.com"}, "password": {"wrong password"}}
	var read atomic.Int64
	for _, tc := range []struct {
		name     string
		body     string
		status   int
		maxBytes int64
	}{
		{"10,000 fields", manyFields(10_000, creds), http.StatusRequestEntityTooLarge, 0},
		{"too many fields", manyFields(8, creds), http.StatusRequestEntityTooLarge, 8 << 10},
		{"a wrong password", creds.Encode(), http.StatusUnauthorized, 8 << 10},
		{"past the address's ceiling", manyFields(100, creds), http.StatusTooManyRequests, 0},
	} {
		read.Store(0)
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, signInPost("192.0.2.1", tc.body, &read))
		if w.Code != tc.status || read.Load() > tc.maxBytes {
			t.Errorf("%s (%d bytes): %d having read %d bytes, want %d having read at most %d",
				tc.name, len(tc.body), w.Code, read.Load(), tc.status, tc.maxBytes)
		}
	}
}

// TestFormsShareTheBodyBudget: a form is read under the body budget the
// API shares, in its owner's share (a client address without a session):
// an address holding its share is refused 429 after the wait, another
// address is not, and a form's reservation is given back with its answer.
func TestFormsShareTheBodyBudget(t *testing.T) {
	budget := bodybudget.New(4<<20, 100*time.Millisecond)
	f := newFixture(t, func(c *console.Config) { c.Bodies = budget })
	hog := budget.Hold("addr:192.0.2.7")
	if err := hog.Grow(context.Background(), budget.Share()); err != nil {
		t.Fatal(err)
	}
	creds := url.Values{"csrf": {"token"}, "email": {"nobody@example.com"}, "password": {"wrong password"}}
	var read atomic.Int64
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, signInPost("192.0.2.7", creds.Encode(), &read))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Errorf("an address at its share: %d, Retry-After %q; want 429 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	w = httptest.NewRecorder()
	f.h.ServeHTTP(w, signInPost("192.0.2.8", creds.Encode(), &read))
	if w.Code != http.StatusUnauthorized {
		t.Errorf("another address: %d, want 401", w.Code)
	}
	if total, _ := budget.Used(""); total != budget.Share() {
		t.Errorf("after the answers the budget holds %d, want only the hog's %d", total, budget.Share())
	}
}

// TestPageFormFieldCap: a signed-in form of more fields than the largest
// legitimate one (the key form, with an agent restriction of
// keys.MaxAgents) gets the 413 page, not a 500; the key form with
// keys.MaxAgents agents ticked is read.
func TestPageFormFieldCap(t *testing.T) {
	f := newFixture(t)
	_, owner := f.account("Acme")
	b := f.signedIn(owner)
	agents := url.Values{"name": {"k"}, "preset": {"read-only"}}
	for i := range keys.MaxAgents {
		agents.Add("agent", domain.NewID(domain.PrefixAgent, time.Now())+strconv.Itoa(i))
	}
	if p := b.post("/console/developers/keys/new", "/console/developers/keys", agents); p.status == http.StatusRequestEntityTooLarge || p.status >= 500 {
		t.Errorf("a key form of %d agents: %d", keys.MaxAgents, p.status)
	}
	for i := range keys.MaxAgents + 300 {
		agents.Add("agent", "ag_"+strconv.Itoa(i))
	}
	p := b.post("/console/developers/keys/new", "/console/developers/keys", agents)
	wantStatus(t, "a form of too many fields", p, http.StatusRequestEntityTooLarge)
	wantHolds(t, "the 413 page", p.body, []string{"too many fields"}, nil)
}
