package clientaddr

import (
	"net/http/httptest"
	"testing"
)

func TestAddr(t *testing.T) {
	r, err := Parse(" 10.0.0.0/8, 192.0.2.7 ,fd00::/8,")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"no proxy", "198.51.100.1:5555", nil, "198.51.100.1"},
		{"untrusted peer's header is ignored", "198.51.100.1:5555", []string{"203.0.113.9"}, "198.51.100.1"},
		{"trusted peer, one hop", "10.1.2.3:443", []string{"203.0.113.9"}, "203.0.113.9"},
		{"client-written entries on the left are ignored", "10.1.2.3:443", []string{"1.2.3.4, 203.0.113.9"}, "203.0.113.9"},
		{"trusted hops are skipped", "10.1.2.3:443", []string{"1.2.3.4, 203.0.113.9, 192.0.2.7, 10.9.9.9"}, "203.0.113.9"},
		{"several field lines are one list", "10.1.2.3:443", []string{"1.2.3.4, 203.0.113.9", "10.9.9.9"}, "203.0.113.9"},
		{"all trusted: the leftmost", "10.1.2.3:443", []string{"10.0.0.1, 10.0.0.2"}, "10.0.0.1"},
		{"trusted peer, no header", "10.1.2.3:443", nil, "10.1.2.3"},
		{"garbage stops the walk at the last trusted hop", "10.1.2.3:443", []string{"203.0.113.9, not-an-ip, 10.0.0.5"}, "10.0.0.5"},
		{"garbage next to the peer", "10.1.2.3:443", []string{"203.0.113.9, bogus"}, "10.1.2.3"},
		{"hop with a port", "10.1.2.3:443", []string{"203.0.113.9:4711"}, "203.0.113.9"},
		{"IPv6 hop", "[fd00::1]:443", []string{"2001:db8::5"}, "2001:db8::5"},
		{"IPv4-mapped peer", "[::ffff:10.1.2.3]:443", []string{"203.0.113.9"}, "203.0.113.9"},
		{"empty entries", "10.1.2.3:443", []string{"203.0.113.9,,"}, "10.1.2.3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = c.peer
			for _, v := range c.xff {
				req.Header.Add("X-Forwarded-For", v)
			}
			if got := r.Addr(req); got != c.want {
				t.Fatalf("Addr = %q, want %q", got, c.want)
			}
		})
	}
	// Trusting nobody, the header never counts.
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "10.1.2.3:443"
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	var none *Resolver
	if got := none.Addr(req); got != "10.1.2.3" {
		t.Fatalf("nil resolver: %q", got)
	}
}

func TestParseRefusesNonsense(t *testing.T) {
	for _, s := range []string{"10.0.0.0/33", "example.com", "10.0.0", "fe80::1%eth0", "1.2.3.4/x"} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted", s)
		}
	}
}

// IPv4-mapped forms name IPv4 peers: in the list, and in what is reported.
func TestMappedAddresses(t *testing.T) {
	for _, list := range []string{"::ffff:10.0.0.0/104", "::ffff:10.1.2.3"} {
		r, err := Parse(list)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = "10.1.2.3:443"
		req.Header.Set("X-Forwarded-For", "203.0.113.9")
		if got := r.Addr(req); got != "203.0.113.9" {
			t.Fatalf("%s: a mapped trusted entry does not match its IPv4 peer: %q", list, got)
		}
		req.RemoteAddr = "[::ffff:198.51.100.7]:1"
		if got := r.Addr(req); got != "198.51.100.7" {
			t.Fatalf("%s: untrusted mapped peer reported as %q", list, got)
		}
	}
	if _, err := Parse("::ffff:0:0/90"); err == nil {
		t.Fatal("a prefix mixing mapped and plain IPv6 was accepted")
	}
}

func TestGroup(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7":            "192.0.2.7",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1": "2001:db8:1:2::/64",
		"2001:db8:1:3::1":      "2001:db8:1:3::/64",
		"::ffff:192.0.2.7":     "::ffff:192.0.2.7",
		"not an address":       "not an address",
	} {
		if got := Group(in); got != want {
			t.Errorf("Group(%q) = %q, want %q", in, got, want)
		}
	}
}
