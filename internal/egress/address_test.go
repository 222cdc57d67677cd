package egress

import (
	"net/netip"
	"testing"
)

func TestBlockedClassifiesEveryRange(t *testing.T) {
	cases := []struct {
		addr    string
		blocked bool
	}{
		// IPv4: refused.
		{"0.0.0.0", true},
		{"0.1.2.3", true},
		{"10.0.0.1", true},
		{"10.255.255.255", true},
		{"100.64.0.1", true},
		{"100.127.255.254", true},
		{"100.100.100.200", true}, // Alibaba metadata
		{"127.0.0.1", true},
		{"127.255.255.254", true},
		{"169.254.0.1", true},
		{"169.254.169.254", true}, // AWS/GCP/Azure metadata
		{"172.16.0.1", true},
		{"172.31.255.255", true},
		{"192.0.0.192", true}, // Oracle metadata
		{"192.0.0.8", true},
		{"192.0.2.1", true},
		{"192.88.99.1", true},
		{"192.168.0.1", true},
		{"192.168.255.255", true},
		{"198.18.0.1", true},
		{"198.19.255.255", true},
		{"198.51.100.7", true},
		{"203.0.113.9", true},
		{"224.0.0.1", true},
		{"239.255.255.250", true},
		{"240.0.0.1", true},
		{"255.255.255.255", true},
		// IPv4: public, including the neighbours of the ranges above.
		{"1.1.1.1", false},
		{"8.8.8.8", false},
		{"9.255.255.255", false},
		{"11.0.0.0", false},
		{"100.63.255.255", false},
		{"100.128.0.0", false},
		{"126.255.255.255", false},
		{"128.0.0.0", false},
		{"169.253.255.255", false},
		{"169.255.0.0", false},
		{"172.15.255.255", false},
		{"172.32.0.0", false},
		{"192.0.1.1", false},
		{"192.167.255.255", false},
		{"192.169.0.0", false},
		{"198.17.255.255", false},
		{"198.20.0.0", false},
		{"223.255.255.255", false},
		// IPv6: refused.
		{"::", true},
		{"::1", true},
		{"::127.0.0.1", true}, // IPv4-compatible
		{"::8.8.8.8", true},   // IPv4-compatible, deprecated whatever it carries
		{"::ffff:127.0.0.1", true},
		{"::ffff:10.0.0.1", true},
		{"::ffff:169.254.169.254", true},
		{"::ffff:100.100.100.200", true},
		{"::ffff:0.0.0.0", true},
		{"::ffff:0:7f00:1", true},        // IPv4-translated 127.0.0.1
		{"64:ff9b::7f00:1", true},        // NAT64 127.0.0.1
		{"64:ff9b::a9fe:a9fe", true},     // NAT64 169.254.169.254
		{"64:ff9b::c0a8:101", true},      // NAT64 192.168.1.1
		{"64:ff9b:1::808:808", true},     // local-use NAT64
		{"2002:7f00:1::", true},          // 6to4 of 127.0.0.1
		{"2002:a00:1::1", true},          // 6to4 of 10.0.0.1
		{"2002:a9fe:a9fe::1", true},      // 6to4 of 169.254.169.254
		{"100::1", true},                 // discard-only
		{"2001::1", true},                // Teredo
		{"2001:2::1", true},              // benchmarking
		{"2001:db8::1", true},            // documentation
		{"3fff::1", true},                // documentation
		{"fc00::1", true},                // unique local
		{"fd00::1", true},                // unique local
		{"fd00:ec2::254", true},          // AWS metadata over IPv6
		{"fe80::1", true},                // link-local
		{"febf:ffff::1", true},           // link-local, its end
		{"fec0::1", true},                // site-local
		{"ff02::1", true},                // multicast
		{"ff05::1:3", true},              // multicast
		{"4000::1", true},                // outside 2000::/3
		{"fe80::1%eth0", true},           // a zone
		{"2606:4700:4700::1111%1", true}, // a zone, even on a public address
		// IPv6: public.
		{"2606:4700:4700::1111", false},
		{"2a00:1450:4001:80b::200e", false},
		{"::ffff:8.8.8.8", false},
		{"64:ff9b::808:808", false}, // NAT64 of a public address
		{"2002:808:808::1", false},  // 6to4 of a public address
		{"2001:200::1", false},      // just past 2001::/23
	}
	for _, c := range cases {
		a := netip.MustParseAddr(c.addr)
		why := Blocked(a)
		if (why != "") != c.blocked {
			t.Errorf("Blocked(%s) = %q, want blocked %v", c.addr, why, c.blocked)
		}
	}
}

func TestBlockedNamesTheReason(t *testing.T) {
	cases := map[string]string{
		"169.254.169.254":        "cloud metadata service",
		"::ffff:169.254.169.254": "cloud metadata service",
		"fd00:ec2::254":          "cloud metadata service",
		"::ffff:127.0.0.1":       "loopback (127.0.0.1 inside IPv6)",
		"100.64.0.1":             "shared address space (CGNAT)",
		"255.255.255.255":        "reserved",
	}
	for addr, want := range cases {
		if got := Blocked(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Blocked(%s) = %q, want %q", addr, got, want)
		}
	}
	if got := Blocked(netip.Addr{}); got == "" {
		t.Error("the zero Addr is not blocked")
	}
}

func TestAllowedBy(t *testing.T) {
	p := netip.MustParsePrefix
	cases := []struct {
		allow []netip.Prefix
		addr  string
		want  bool
	}{
		{nil, "127.0.0.1", false},
		{[]netip.Prefix{p("127.0.0.0/8")}, "127.0.0.1", true},
		{[]netip.Prefix{p("127.0.0.0/8")}, "::ffff:127.0.0.1", true},
		{[]netip.Prefix{p("127.0.0.0/8")}, "::1", false},
		{[]netip.Prefix{p("::1/128")}, "::1", true},
		{[]netip.Prefix{p("10.1.0.0/16")}, "10.2.0.1", false},
		// A wide range does not open a metadata service; naming it does.
		{[]netip.Prefix{p("169.254.0.0/16")}, "169.254.169.254", false},
		{[]netip.Prefix{p("169.254.0.0/16")}, "169.254.1.1", true},
		{[]netip.Prefix{p("0.0.0.0/0")}, "100.100.100.200", false},
		{[]netip.Prefix{p("fc00::/7")}, "fd00:ec2::254", false},
		{[]netip.Prefix{p("169.254.169.254/32")}, "169.254.169.254", true},
	}
	for _, c := range cases {
		if got := allowedBy(c.allow, netip.MustParseAddr(c.addr)); got != c.want {
			t.Errorf("allowedBy(%v, %s) = %v, want %v", c.allow, c.addr, got, c.want)
		}
	}
}
