package domain

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// MaxAllowedIPs bounds a key's IP allowlist (decisions.md, "Keys beyond the
// anchors").
const MaxAllowedIPs = 50

// AllowList is a key's IP allowlist: the addresses and CIDR prefixes it may
// be used from. Empty means any address.
//
// Entries are held in canonical form: a single address is a full-length
// prefix (10.0.0.1/32, 2001:db8::1/128), an IPv4-mapped IPv6 entry is held
// as its IPv4 form (::ffff:10.0.0.0/104 is 10.0.0.0/8), IPv6 is in RFC 5952
// form, and no entry repeats.
type AllowList []netip.Prefix

// ParseAllowList reads an allowlist as people write it: entries separated
// by commas and/or white space (spaces, line breaks), each an IPv4 or IPv6
// address or a CIDR prefix. Blank input is the empty list (any address);
// input that is not blank but holds no entry ("," alone) is refused, so a
// slip never leaves a key unrestricted. A prefix with host bits set
// (10.0.0.1/8) is refused rather than guessed at, as are zones (fe80::1%eth0)
// and more than MaxAllowedIPs distinct entries. Errors name the field
// "allowed_ips".
func ParseAllowList(s string) (AllowList, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	items := strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
	if len(items) == 0 {
		return nil, allowListErr("the IP allowlist has no address in it; leave it empty to allow any address")
	}
	return NewAllowList(items)
}

// NewAllowList is ParseAllowList for entries already apart (an API array,
// a stored list).
func NewAllowList(items []string) (AllowList, error) {
	var out AllowList
	for _, item := range items {
		p, err := parseAllowEntry(strings.TrimSpace(item))
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(out) > MaxAllowedIPs {
		return nil, allowListErr("an IP allowlist holds at most %d addresses or CIDR prefixes; %d were given", MaxAllowedIPs, len(out))
	}
	return out, nil
}

func parseAllowEntry(s string) (netip.Prefix, error) {
	shown := s
	if len(shown) > 64 {
		shown = shown[:64] + "…"
	}
	if s == "" {
		return netip.Prefix{}, allowListErr("an entry of the IP allowlist is empty")
	}
	if strings.ContainsRune(s, '%') {
		return netip.Prefix{}, allowListErr("%q: an allowlist entry cannot carry a zone", shown)
	}
	p, err := netip.ParsePrefix(s)
	if a, aerr := netip.ParseAddr(s); aerr == nil {
		p, err = netip.PrefixFrom(a, a.BitLen()), nil
	}
	if err != nil {
		return netip.Prefix{}, allowListErr("%q is not an IP address or CIDR prefix", shown)
	}
	if p.Masked() != p {
		return netip.Prefix{}, allowListErr("%q has bits set after the prefix length; did you mean %s?", shown, canonicalPrefix(p.Masked()))
	}
	return canonicalPrefix(p), nil
}

// canonicalPrefix holds an IPv4-mapped IPv6 prefix (at least /96) as the
// IPv4 prefix it covers, since client addresses are matched unmapped.
func canonicalPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

func allowListErr(format string, args ...any) *Error {
	return FieldErr(CodeInvalidValue, "allowed_ips", fmt.Sprintf(format, args...))
}

// Strings is the list as shown and stored: a single address without its
// prefix length (10.0.0.1), a range with it (10.0.0.0/8). Never nil, so
// that JSON shows [] for an unrestricted key.
func (l AllowList) Strings() []string {
	out := make([]string, len(l))
	for i, p := range l {
		if p.IsSingleIP() {
			out[i] = p.Addr().String()
		} else {
			out[i] = p.String()
		}
	}
	return out
}

// String is Strings joined by ", ", for people.
func (l AllowList) String() string { return strings.Join(l.Strings(), ", ") }

// AllowsAddr reports whether a client at addr (clientaddr.Resolver.Addr)
// may use the key: always when the list is empty; otherwise when an entry
// contains addr. An IPv4-mapped IPv6 address is matched as its IPv4 form;
// text that is not an address matches nothing.
func (l AllowList) AllowsAddr(addr string) bool {
	if len(l) == 0 {
		return true
	}
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	a = a.Unmap().WithZone("")
	return slices.ContainsFunc(l, func(p netip.Prefix) bool { return p.Contains(a) })
}
