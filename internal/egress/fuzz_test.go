package egress

import (
	"net/netip"
	"net/url"
	"testing"
)

// FuzzBlockedIPv6Forms: an IPv4 address and every IPv6 form that reaches
// it (IPv4-mapped, NAT64, 6to4) are judged alike, so no spelling of an
// internal address slips through.
func FuzzBlockedIPv6Forms(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "10.1.2.3", "169.254.169.254", "100.100.100.200", "8.8.8.8", "0.0.0.0", "255.255.255.255"} {
		f.Add(netip.MustParseAddr(s).AsSlice())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) != 4 {
			return
		}
		v4 := netip.AddrFrom4([4]byte(b))
		want := Blocked(v4) != ""
		var nat, six [16]byte
		copy(nat[:], netip.MustParseAddr("64:ff9b::").AsSlice())
		copy(nat[12:], b)
		six[0], six[1] = 0x20, 0x02
		copy(six[2:6], b)
		for _, a := range []netip.Addr{netip.AddrFrom16(v4.As16()), netip.AddrFrom16(nat), netip.AddrFrom16(six)} {
			if got := Blocked(a) != ""; got != want {
				t.Fatalf("Blocked(%s) = %v, Blocked(%s) = %v", v4, want, a, got)
			}
		}
	})
}

// FuzzCheckURL: whatever URL an endpoint is given, CheckURL does not panic,
// and a URL it accepts is https:// (no range is allowed here) with a host
// that, when an address, is public.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"https://hooks.example.com/x", "http://127.0.0.1/", "https://[::ffff:127.0.0.1]:443/", "https://0x7f.1/", "https://2130706433/", "https://[fe80::1%25eth0]/", "ftp://x/"} {
		f.Add(s)
	}
	c := New(Config{})
	f.Fuzz(func(t *testing.T, raw string) {
		if c.CheckURL(raw) != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "https" || u.Hostname() == "" {
			t.Fatalf("accepted %q", raw)
		}
		if a, err := netip.ParseAddr(u.Hostname()); err == nil && Blocked(a) != "" {
			t.Fatalf("accepted %q: %s is %s", raw, a, Blocked(a))
		}
	})
}
