// Package clientaddr finds the address of the client behind a request: the
// connection's peer, or, when that peer is a proxy the operator trusts, the
// address that proxy saw, taken from X-Forwarded-For.
//
// Per-address limits (requests without a key, console sign-in) and the
// request log use it. Behind a load balancer every connection comes from the
// balancer, so without it all clients would share one address and one
// budget. Only the proxies named are believed: X-Forwarded-For is read from
// the right, each hop added by a trusted proxy is skipped, and the first
// address that no trusted proxy vouches for is the client. Whatever a client
// writes into the header itself sits to the left of that and is never used.
package clientaddr

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// Resolver resolves client addresses. The zero value, and nil, trust no
// proxy: the address is always the connection's peer.
type Resolver struct {
	trusted []netip.Prefix
}

// Parse reads a comma-separated list of trusted proxies, each an IP address
// or a CIDR prefix ("10.0.0.0/8, 192.0.2.7, fd00::/8"). An empty list trusts
// none.
func Parse(list string) (*Resolver, error) {
	r := &Resolver{}
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p, err := netip.ParsePrefix(item)
		if a, aerr := netip.ParseAddr(item); aerr == nil && a.Zone() == "" {
			p, err = netip.PrefixFrom(a, a.BitLen()), nil
		}
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q is not an IP address or CIDR prefix", item)
		}
		if a := p.Addr(); a.Is4In6() {
			if p.Bits() < 96 {
				return nil, fmt.Errorf("trusted proxy %q mixes IPv4-mapped and IPv6 addresses", item)
			}
			// ::ffff:10.0.0.0/104 is 10.0.0.0/8: peers are compared unmapped.
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		r.trusted = append(r.trusted, p.Masked())
	}
	return r, nil
}

// Trusts reports whether a is a trusted proxy.
func (r *Resolver) Trusts(a netip.Addr) bool {
	a = a.Unmap()
	return r != nil && slices.ContainsFunc(r.trusted, func(p netip.Prefix) bool { return p.Contains(a) })
}

// Addr is the client's address for req, as text (no port).
func (r *Resolver) Addr(req *http.Request) string {
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		host = req.RemoteAddr
	}
	if r == nil || len(r.trusted) == 0 {
		return host
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if !r.Trusts(peer) {
		return peer.Unmap().String()
	}
	// The peer is a trusted proxy: walk X-Forwarded-For (every field line,
	// in order, is one list) from the right.
	hops := req.Header.Values("X-Forwarded-For")
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		line := hops[i]
		for line != "" {
			j := strings.LastIndexByte(line, ',') // -1 for the last item: all of line
			item := line[j+1:]
			line = line[:max(j, 0)]
			a, ok := parseHop(strings.TrimSpace(item))
			if !ok {
				// A hop a trusted proxy would not write: what lies to its
				// left is the client's own say. Stop at the last address
				// a trusted proxy gave.
				return client.Unmap().String()
			}
			client = a
			if !r.Trusts(a) {
				return a.Unmap().String()
			}
		}
	}
	// Every hop is trusted: the leftmost is as far as anyone can see.
	return client.Unmap().String()
}

// parseHop reads one X-Forwarded-For entry: an address, or, as some
// proxies write it, an address with a port.
func parseHop(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return a, true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil && ap.Addr().Zone() == "" {
		return ap.Addr(), true
	}
	return netip.Addr{}, false
}

// Group is the unit a per-address limit counts for addr (as Addr returns
// it): the address itself for IPv4, its /64 for IPv6, since one host is
// routinely given a whole /64 and could otherwise spread its requests over
// 2^64 "addresses". Text that is not an address is its own group.
func Group(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil || !a.Is6() || a.Is4In6() {
		return addr
	}
	return netip.PrefixFrom(a.WithZone(""), 64).Masked().String()
}
