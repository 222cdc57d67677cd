package egress

import (
	"net/netip"
)

// blockedRange is a range no delivery may reach unless an operator allows it.
type blockedRange struct {
	prefix netip.Prefix
	reason string
}

// metadataAddrs are the clouds' instance metadata services: they hand out
// credentials to whoever asks from inside, so a wide allowed range does not
// open them; only an allowed prefix naming the address alone does.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, DigitalOcean, …
	netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("192.0.0.192"),     // Oracle Cloud
}

// blockedV4 lists the IPv4 ranges that are not the public internet
// (IANA's special-purpose registry, RFC 6890, and its updates).
var blockedV4 = []blockedRange{
	{netip.MustParsePrefix("0.0.0.0/8"), "this network"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (CGNAT)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // 255.255.255.255, broadcast, included
}

// blockedV6 lists the IPv6 ranges refused outright. Forms that carry an
// IPv4 address (mapped, NAT64, 6to4) are judged by that address instead;
// see embeddedV4.
var blockedV6 = []blockedRange{
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible (deprecated)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001::/23"), "IETF protocol assignments (Teredo, benchmarking, ORCHID)"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"},
	{netip.MustParsePrefix("fc00::/7"), "unique local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local (deprecated)"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

var (
	globalUnicastV6 = netip.MustParsePrefix("2000::/3")
	nat64           = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour       = netip.MustParsePrefix("2002::/16")
	ipv4Translated  = netip.MustParsePrefix("::ffff:0:0:0/96")
)

// Blocked reports why a is not a public internet address (loopback,
// private, link-local, CGNAT, multicast, unspecified, broadcast, reserved,
// documentation, unique local, a cloud metadata service, or an IPv6 form
// of any of those), or "" when it is public. An address with a zone is
// always blocked: zones only exist on link-local networks.
func Blocked(a netip.Addr) string {
	if !a.IsValid() {
		return "invalid"
	}
	if a.Zone() != "" {
		return "scoped (has a zone)"
	}
	if isMetadata(a) {
		return "cloud metadata service"
	}
	if v4, ok := embeddedV4(a); ok {
		if why := Blocked(v4); why != "" {
			return why + " (" + v4.String() + " inside IPv6)"
		}
		return ""
	}
	if a.Is4() {
		return rangeReason(blockedV4, a)
	}
	if why := rangeReason(blockedV6, a); why != "" {
		return why
	}
	if !globalUnicastV6.Contains(a) {
		return "not global unicast"
	}
	return ""
}

// embeddedV4 returns the IPv4 address an IPv6 form carries, for the forms
// that reach that IPv4 address: IPv4-mapped (::ffff:a.b.c.d), IPv4-translated
// (::ffff:0:a.b.c.d), NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:AABB:CCDD::).
func embeddedV4(a netip.Addr) (netip.Addr, bool) {
	if a.Is4In6() {
		return a.Unmap(), true
	}
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case nat64.Contains(a), ipv4Translated.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// isMetadata reports whether a is a metadata service's address, written
// as IPv4 or in any IPv6 form that carries it.
func isMetadata(a netip.Addr) bool {
	if v4, ok := embeddedV4(a); ok {
		a = v4
	}
	for _, m := range metadataAddrs {
		if a == m {
			return true
		}
	}
	return false
}

func rangeReason(ranges []blockedRange, a netip.Addr) string {
	for _, r := range ranges {
		if r.prefix.Contains(a) {
			return r.reason
		}
	}
	return ""
}

// allowedBy reports whether an operator's prefixes let a through although
// Blocked refuses it. A metadata address needs a prefix that names it alone
// (a /32 or /128), so allowing 169.254.0.0/16 does not open 169.254.169.254.
func allowedBy(allow []netip.Prefix, a netip.Addr) bool {
	meta := isMetadata(a)
	for _, p := range allow {
		if !prefixContains(p, a) {
			continue
		}
		if !meta || p.IsSingleIP() {
			return true
		}
	}
	return false
}

// prefixContains is p.Contains, also matching an IPv4 prefix against the
// IPv4-mapped form of its addresses (what a dual-stack resolver may return).
func prefixContains(p netip.Prefix, a netip.Addr) bool {
	if p.Contains(a) {
		return true
	}
	return a.Is4In6() && p.Contains(a.Unmap())
}
