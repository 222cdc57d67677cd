package api

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/agentapi/agentapi/internal/clientaddr"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
)

const notFromHere = "This API key may not be used from this address."

func allowList(t *testing.T, s string) domain.AllowList {
	t.Helper()
	l, err := domain.ParseAllowList(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func allowedIPsOf(t *testing.T, r *response) []string {
	t.Helper()
	raw, ok := r.data()["allowed_ips"].([]any)
	if !ok {
		t.Fatalf("allowed_ips is %#v, want an array", r.data()["allowed_ips"])
	}
	out := []string{}
	for _, v := range raw {
		out = append(out, v.(string))
	}
	return out
}

// A key with an allowlist answers from its addresses (IPv4-mapped included)
// and is 403 from any other, before its rate limit: the refusals are not
// counted against the key but against the address, whose limiter turns
// them into 429 past its limit. GET /me shows the list, [] when unrestricted.
func TestAllowedIPsRefuseOtherAddresses(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newFixture(t, engine, func(c *Config) { c.UnauthRateLimit = 5 })
		c := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) {
			p.AllowedIPs = allowList(t, "192.0.2.1, 2001:db8::/32")
			p.RateLimit = 2
		}, allAgentScopes...)
		from := func(remote string) *response {
			return f.do(req{method: "GET", path: "/v1/me", key: c.Credential, remote: remote})
		}
		for range 4 {
			r := from("198.51.100.7:4000")
			r.wantError(t, 403, domain.CodeAccessDenied)
			if r.message() != notFromHere {
				t.Fatalf("message %q", r.message())
			}
			if got := r.Header().Get("RateLimit-Policy"); got != `"per-address";q=5;w=60` {
				t.Fatalf("refusal counted by %q, want the per-address limiter", got)
			}
		}
		// The key's limit of 2 is untouched by the four refusals.
		for _, remote := range []string{"192.0.2.1:1", "[::ffff:192.0.2.1]:2"} {
			r := from(remote)
			r.wantStatus(t, 200)
			if got := allowedIPsOf(t, r); !slices.Equal(got, []string{"192.0.2.1", "2001:db8::/32"}) {
				t.Fatalf("allowed_ips %q", got)
			}
		}
		from("[2001:db8::5]:3").wantError(t, 429, domain.CodeRateLimitExceeded)
		// The address's own limit: its fifth refusal is allowed, the sixth is 429.
		from("198.51.100.7:4000").wantError(t, 403, domain.CodeAccessDenied)
		from("198.51.100.7:4000").wantError(t, 429, domain.CodeRateLimitExceeded)

		open := f.key(allAgentScopes...)
		r := f.do(req{method: "GET", path: "/v1/me", key: open, remote: "198.51.100.8:1"})
		r.wantStatus(t, 200)
		if got := allowedIPsOf(t, r); len(got) != 0 {
			t.Fatalf("unrestricted key: allowed_ips %q, want []", got)
		}
	})
}

// Behind a trusted proxy the address checked is the one X-Forwarded-For
// gives; from an untrusted peer the header is ignored.
func TestAllowedIPsThroughTrustedProxy(t *testing.T) {
	proxies, err := clientaddr.Parse("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, "sqlite", func(c *Config) { c.ClientAddr = proxies })
	c := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.AllowedIPs = allowList(t, "203.0.113.0/24") }, allAgentScopes...)
	for _, tc := range []struct {
		remote, xff string
		status      int
	}{
		{"10.1.2.3:5000", "203.0.113.9", 200},
		{"10.1.2.3:5000", "203.0.113.9, 10.9.9.9", 200},
		{"10.1.2.3:5000", "198.51.100.1", 403},
		{"10.1.2.3:5000", "203.0.113.9, 198.51.100.1", 403}, // the client put the allowed address first
		{"10.1.2.3:5000", "", 403},                          // the proxy itself is not allowed
		{"198.51.100.1:5000", "203.0.113.9", 403},           // not a trusted proxy: header ignored
		{"203.0.113.50:5000", "198.51.100.1", 200},          // likewise
	} {
		var hs []string
		if tc.xff != "" {
			hs = []string{"X-Forwarded-For: " + tc.xff}
		}
		r := f.do(req{method: "GET", path: "/v1/me", key: c.Credential, remote: tc.remote, headers: hs})
		if r.Code != tc.status {
			t.Errorf("peer %s, X-Forwarded-For %q: %d, want %d (%s)", tc.remote, tc.xff, r.Code, tc.status, r.Body.String())
		}
	}
}

// Over real connections: a server on 127.0.0.1 and one on ::1, clients
// bound to 127.0.0.1 and 127.0.0.2 as their local address.
func TestAllowedIPsFromLoopbackAddresses(t *testing.T) {
	f := newFixture(t, "sqlite")
	c := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.AllowedIPs = allowList(t, "127.0.0.2, ::1") }, allAgentScopes...)
	v4 := httptest.NewServer(f.h) // listens on 127.0.0.1
	defer v4.Close()
	ln6, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	v6 := httptest.NewUnstartedServer(f.h)
	v6.Listener.Close()
	v6.Listener = ln6
	v6.Start()
	defer v6.Close()
	get := func(url string, local net.IP) int {
		t.Helper()
		d := &net.Dialer{}
		if local != nil {
			d.LocalAddr = &net.TCPAddr{IP: local}
		}
		cl := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
		defer cl.CloseIdleConnections()
		rq, _ := http.NewRequestWithContext(context.Background(), "GET", url+"/v1/me", nil)
		rq.Header.Set("Authorization", "Bearer "+c.Credential)
		resp, err := cl.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get(v4.URL, net.ParseIP("127.0.0.1")); got != 403 {
		t.Errorf("from 127.0.0.1: %d, want 403", got)
	}
	if got := get(v4.URL, net.ParseIP("127.0.0.2")); got != 200 {
		t.Errorf("from 127.0.0.2: %d, want 200", got)
	}
	if got := get(v6.URL, nil); got != 200 {
		t.Errorf("from ::1: %d, want 200", got)
	}
}

// An edit made on one instance applies on the very next request at
// another instance sharing the store, although that one holds the key.
func TestAllowedIPsEditAppliesOnAnotherInstance(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		served, other := sharedStores(t, engine)
		f := newFixtureOn(t, served)
		g := newFixtureOn(t, other)
		c := f.keyIn(f.account, f.owner, nil, allAgentScopes...)
		from := func(remote string) *response {
			return f.do(req{method: "GET", path: "/v1/me", key: c.Credential, remote: remote})
		}
		for range 3 {
			from("192.0.2.1:1").wantStatus(t, 200)
		}
		if _, err := g.keys.SetAllowedIPs(context.Background(), keys.Actor{User: &f.owner}, f.account.ID, c.Key.ID, allowList(t, "198.51.100.0/24")); err != nil {
			t.Fatal(err)
		}
		from("192.0.2.1:1").wantError(t, 403, domain.CodeAccessDenied)
		from("198.51.100.4:1").wantStatus(t, 200)
		if _, err := g.keys.SetAllowedIPs(context.Background(), keys.Actor{User: &f.owner}, f.account.ID, c.Key.ID, nil); err != nil {
			t.Fatal(err)
		}
		from("192.0.2.1:1").wantStatus(t, 200)
	})
}
