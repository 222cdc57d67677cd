// Package egress owns where webhook deliveries may go: an HTTP client that
// resolves the destination at every attempt, refuses addresses that are not
// the public internet (loopback, private, link-local, CGNAT, metadata
// services, …) unless the operator allowed them, connects to exactly the
// address it checked, follows no redirects, and bounds time and answer
// size. docs/webhooks.md ("Where deliveries may go") describes the rules.
package egress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Defaults for the zero values of Config.
const (
	DefaultTimeout = 15 * time.Second
	DefaultMaxBody = 64 << 10
	DefaultKeep    = 1 << 10
)

// Error classes, as the delivery log shows them.
const (
	ClassTimeout           = "timeout"
	ClassConnectionRefused = "connection_refused"
	ClassAddressNotAllowed = "address_not_allowed"
	ClassTLS               = "tls"
	ClassDNS               = "dns"
	ClassConnectionError   = "connection_error"
)

// Resolver looks a host name up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config sets a Client up; the zero value is usable.
type Config struct {
	// Allow lists ranges that may be reached although they are not the
	// public internet, and over http:// as well as https://
	// (serve --webhook-allow).
	Allow []netip.Prefix
	// Timeout bounds a whole attempt: lookup, connection, TLS, request and
	// reading the answer (DefaultTimeout when zero).
	Timeout time.Duration
	// MaxBody is how much of an answer is read at most (DefaultMaxBody when zero).
	MaxBody int64
	// Keep is how much of the answer's start Result.Body keeps (DefaultKeep when zero).
	Keep int
	// UserAgent is sent as User-Agent when set.
	UserAgent string
	// Resolver looks host names up (net.DefaultResolver when nil).
	Resolver Resolver
}

// Result is what an attempt came to. StatusCode is 0 when no answer came;
// then Class says why.
type Result struct {
	StatusCode int
	Header     http.Header // the answer's headers (Retry-After, …); nil without an answer
	Body       []byte      // the first Keep bytes of the answer
	Latency    time.Duration
	Class      string // one of the Class constants when the attempt failed; "" with an answer
}

// Error is an attempt that got no answer: Class is what the delivery log
// shows, Err the cause (for the server's log).
type Error struct {
	Class string
	Err   error
}

func (e *Error) Error() string { return "webhook delivery: " + e.Class + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// errNotAllowed marks a destination the rules refuse.
var errNotAllowed = errors.New("address not allowed")

// Client posts webhook deliveries. It is safe for concurrent use.
type Client struct {
	allow    []netip.Prefix
	timeout  time.Duration
	maxBody  int64
	keep     int
	ua       string
	resolver Resolver
	// dial connects to a checked address; tests replace it to watch where
	// connections go.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	http *http.Client
}

// New returns a Client for cfg.
func New(cfg Config) *Client {
	c := &Client{
		allow:    append([]netip.Prefix(nil), cfg.Allow...),
		timeout:  orDefault(cfg.Timeout, DefaultTimeout),
		maxBody:  orDefault(cfg.MaxBody, DefaultMaxBody),
		keep:     orDefault(cfg.Keep, DefaultKeep),
		ua:       cfg.UserAgent,
		resolver: cfg.Resolver,
	}
	if c.resolver == nil {
		c.resolver = net.DefaultResolver
	}
	if int64(c.keep) > c.maxBody {
		c.keep = int(c.maxBody)
	}
	c.dial = (&net.Dialer{Timeout: c.timeout, KeepAlive: 30 * time.Second}).DialContext
	tr := &http.Transport{
		// Never a proxy from the environment: the connection must go to the
		// address that was checked.
		Proxy:                 nil,
		DialContext:           c.dialChecked,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   c.timeout,
		ResponseHeaderTimeout: c.timeout,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       90 * time.Second,
	}
	c.http = &http.Client{
		Transport: tr,
		// A redirect is the answer: the delivery log counts a 3xx as a failure.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Post sends body to rawURL with header, within the Client's time-out. An
// answer of any status (3xx included: redirects are not followed) is a
// Result with a nil error; anything else is a Result with Class set and an
// *Error. Content-Type defaults to application/json.
func (c *Client) Post(ctx context.Context, rawURL string, header http.Header, body []byte) (Result, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	res, err := c.post(ctx, rawURL, header, body)
	res.Latency = time.Since(start)
	if err != nil {
		class := classify(ctx, err)
		res.Class = class
		return res, &Error{Class: class, Err: err}
	}
	return res, nil
}

func (c *Client) post(ctx context.Context, rawURL string, header http.Header, body []byte) (Result, error) {
	u, err := c.target(rawURL)
	if err != nil {
		return Result{}, err
	}
	addrs, err := c.resolve(ctx, u.Hostname())
	if err != nil {
		return Result{}, err
	}
	if err := c.check(u.Scheme, addrs); err != nil {
		return Result{}, err
	}
	req, err := http.NewRequestWithContext(withChecked(ctx, u.Hostname(), addrs), http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return Result{}, fmt.Errorf("build request: %w", err)
	}
	c.setHeaders(req, header)
	resp, err := c.http.Do(req)
	if err != nil {
		return Result{}, err
	}
	defer resp.Body.Close()
	return Result{StatusCode: resp.StatusCode, Header: resp.Header, Body: c.readBody(resp.Body)}, nil
}

func (c *Client) setHeaders(req *http.Request, header http.Header) {
	for k, vs := range header {
		req.Header[k] = append([]string(nil), vs...)
	}
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.ua != "" {
		req.Header.Set("User-Agent", c.ua)
	}
}

// readBody reads at most maxBody bytes of the answer and keeps the first
// keep. An answer cut short (time-out, reset) keeps what arrived: the status
// already came, and it is what the delivery is judged by.
func (c *Client) readBody(r io.Reader) []byte {
	var kept bytes.Buffer
	_, _ = io.CopyN(&kept, r, int64(c.keep))
	_, _ = io.Copy(io.Discard, io.LimitReader(r, c.maxBody-int64(kept.Len())))
	return kept.Bytes()
}

// CheckURL reports whether rawURL is a destination deliveries may have,
// as far as it can tell without a lookup: an absolute https:// URL (or
// http:// when some range is allowed) with a host, and an IP literal host
// that is allowed. A name is checked at every attempt, by Post.
func (c *Client) CheckURL(rawURL string) error {
	u, err := c.target(rawURL)
	if err != nil {
		return err
	}
	if a, err := netip.ParseAddr(u.Hostname()); err == nil {
		return c.check(u.Scheme, []netip.Addr{a})
	}
	if u.Scheme == "http" && len(c.allow) == 0 {
		return fmt.Errorf("%w: http:// only to an allowed range (--webhook-allow)", errNotAllowed)
	}
	return nil
}

// target parses rawURL and refuses what no attempt could deliver to.
func (c *Client) target(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNotAllowed, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("%w: scheme %q (https:// only)", errNotAllowed, u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("%w: no host", errNotAllowed)
	}
	// The transport dials the name in its ASCII form; so must the lookup,
	// which is only sure when the URL already holds it (punycode).
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			return nil, fmt.Errorf("%w: host %q is not ASCII (write it in punycode)", errNotAllowed, host)
		}
	}
	return u, nil
}

// resolve returns the addresses of host: the literal itself, or every
// address the resolver gives, looked up now, once.
func (c *Client) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	addrs, err := c.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("lookup %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

// check refuses the attempt if any of addrs may not be reached: a
// resolver's answer is refused whole, not filtered, so a name that mixes a
// public and an internal address never reaches the internal one.
func (c *Client) check(scheme string, addrs []netip.Addr) error {
	for _, a := range addrs {
		allowed := allowedBy(c.allow, a)
		if scheme == "http" && !allowed {
			return fmt.Errorf("%w: http:// to %s, outside the allowed ranges (https:// only)", errNotAllowed, a)
		}
		if why := Blocked(a); why != "" && !allowed {
			return fmt.Errorf("%w: %s is %s", errNotAllowed, a, why)
		}
	}
	return nil
}

// checked carries the addresses a request's host was checked to have, from
// Post to the dial, in the request's context.
type checked struct {
	host     string
	addrs    []netip.Addr
	deadline time.Time
}

type checkedKey struct{}

func withChecked(ctx context.Context, host string, addrs []netip.Addr) context.Context {
	deadline, _ := ctx.Deadline()
	return context.WithValue(ctx, checkedKey{}, checked{host: host, addrs: addrs, deadline: deadline})
}

// dialChecked is the transport's only way out: it connects to the
// addresses Post checked for this host, one after another, and never looks
// the name up again. A dial without them (or for another host) is refused.
func (c *Client) dialChecked(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	ch, ok := ctx.Value(checkedKey{}).(checked)
	if !ok || !strings.EqualFold(ch.host, host) {
		return nil, fmt.Errorf("%w: dial %s without a check", errNotAllowed, addr)
	}
	// The transport dials apart from the request's cancellation (a late
	// connection may serve the next request); the attempt's deadline still
	// bounds it, so a dial never outlives its attempt.
	if !ch.deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, ch.deadline)
		defer cancel()
	}
	var last error
	for _, a := range ch.addrs {
		conn, err := c.dial(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
}
