// Package client is the Go client for the agentapi HTTP API (/v1): typed
// methods for every endpoint, errors as *Error carrying the contract's code,
// pagination as an iterator, and retries exactly where the contract's
// client guidance allows them.
//
// # Retries
//
// A request is retried only when the contract says it is safe:
//
//   - 400, 401, 403, 404 and 409 are never retried. 401 invalid_credentials
//     needs a human to fix the key; 409 immutable_state and
//     inconsistent_state call for re-reading the record.
//   - 429 rate_limit_exceeded is retried after the Retry-After seconds the
//     server sent, never sooner. When the context's deadline comes before
//     that, or Retry-After exceeds RetryPolicy.MaxRetryAfter, or is absent
//     or unusable (not in the future, more than 24 h away), the 429 is
//     returned at once instead of sleeping.
//   - 5xx is retried with exponential backoff and full jitter: before retry
//     n (from 1) the client sleeps a uniformly random time in
//     [0, min(MaxDelay, BaseDelay·2^(n-1))).
//   - A transport error (connection refused or reset, time-out of the
//     http.Client) is retried like a 5xx.
//
// [Client.CreateAgent] and [Client.Ask] send an Idempotency-Key, a random
// one per call that every retry of the call repeats, so the server creates
// the agent or asks the model at most once however many attempts it takes;
// a retry that arrives while the first attempt still runs gets 409
// inconsistent_state, which is returned.
//   - An answer larger than 8 MiB is not the API's; it is returned as an
//     error, not retried.
//
// Every wait is bounded by the context: when it is cancelled mid-wait, the
// call returns at once with an error that matches both the context's error
// (errors.Is) and the last *Error (errors.As). A wait that would end after the
// context's deadline is not started. RetryPolicy.MaxAttempts bounds the
// number of requests per call.
//
// Request bodies are held as bytes, so every attempt sends the same body.
//
// # The key
//
// The key is sent only in the Authorization header, never in a URL. New
// checks its form (agk_<env>_<prefix>_<secret> with its checksum) without
// ever printing it, and a Client prints as its base URL and the key's public
// prefix only (fmt, %#v, slog). The client does not follow redirects, so the
// header never goes to another address. Over plain http the key would
// travel in clear text, so New refuses an http:// base URL unless its host
// is loopback (localhost, 127.0.0.0/8, ::1) or [WithInsecureHTTP] is given.
package client

import (
	"bytes"
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultUserAgent is sent when WithUserAgent is not given.
const DefaultUserAgent = "agentapi-go-client/1"

// maxBody caps how much of a response is read: a page of 100 agents is a
// few tens of KiB, so anything near this is not the API.
const maxBody = 8 << 20

// RetryPolicy bounds retries. The zero value of a field means its default.
type RetryPolicy struct {
	// MaxAttempts is the most requests one call makes, the first included.
	// Default 4; 1 disables retries.
	MaxAttempts int
	// BaseDelay is the backoff cap before the first retry of a 5xx or
	// transport error; it doubles with each retry. Default 250 ms.
	BaseDelay time.Duration
	// MaxDelay caps the backoff. Default 8 s.
	MaxDelay time.Duration
	// MaxRetryAfter is the longest Retry-After the client waits out on a
	// 429; a longer one is returned as the error at once. Default 60 s,
	// the length of the rate-limit window.
	MaxRetryAfter time.Duration
}

// DefaultRetryPolicy is the policy of a Client built without WithRetry.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: 4, BaseDelay: 250 * time.Millisecond, MaxDelay: 8 * time.Second, MaxRetryAfter: 60 * time.Second}
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy()
	// A negative field, like a zero one, means its default.
	return RetryPolicy{
		MaxAttempts:   cmp.Or(max(p.MaxAttempts, 0), d.MaxAttempts),
		BaseDelay:     cmp.Or(max(p.BaseDelay, 0), d.BaseDelay),
		MaxDelay:      cmp.Or(max(p.MaxDelay, 0), d.MaxDelay),
		MaxRetryAfter: cmp.Or(max(p.MaxRetryAfter, 0), d.MaxRetryAfter),
	}
}

// Client calls the API with one key. It is safe for concurrent use.
type Client struct {
	base string // scheme://host[:port]/path ending in /v1, no trailing slash
	// key is behind a pointer: fmt prints a Client held in another value's
	// unexported field without calling its Format, and shows a pointer
	// there as an address.
	key       *secret
	prefix    string // the key's public prefix, safe to print
	hc        *http.Client
	userAgent string
	retry     RetryPolicy
	insecure  bool
	// sleep waits d or until ctx is done; jitter returns a uniform value in
	// [0, n). Both are replaced in tests so that no test waits.
	sleep  func(ctx context.Context, d time.Duration) error
	jitter func(n int64) int64
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the http.Client used for requests (its Transport and
// Timeout). The client works on a copy that never follows redirects.
// Without it, http.DefaultClient's transport is used and only the
// context bounds a request.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetry sets the retry policy; zero fields keep their defaults.
func WithRetry(p RetryPolicy) Option { return func(c *Client) { c.retry = p } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithInsecureHTTP allows an http:// base URL whose host is not loopback,
// sending the key in clear text. Use it only on a network you trust.
func WithInsecureHTTP() Option { return func(c *Client) { c.insecure = true } }

// New returns a client for baseURL, which ends in /v1 (for example
// https://api.example.com/v1), authenticating with key.
func New(baseURL, key string, opts ...Option) (*Client, error) {
	c := &Client{
		key: &secret{key}, userAgent: DefaultUserAgent,
		sleep: sleepCtx, jitter: rand.Int64N,
	}
	for _, o := range opts {
		o(c)
	}
	c.retry = c.retry.withDefaults()
	prefix, err := checkKey(key)
	if err != nil {
		return nil, err
	}
	c.prefix = prefix
	base, err := checkBase(baseURL, c.insecure)
	if err != nil {
		// The URL is quoted back, and a key pasted into it (a query, the
		// user info) would be with it.
		return nil, errors.New(strings.ReplaceAll(err.Error(), key, "agk_…_"+prefix+"_…"))
	}
	c.base = base
	cp := *cmp.Or(c.hc, http.DefaultClient)
	// The API never redirects; following one could carry the key elsewhere.
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.hc = &cp
	return c, nil
}

type secret struct{ s string }

// errKeyForm never names the key: an error message may well be logged.
var errKeyForm = errors.New("client: the API key is not of the form agk_<env>_<prefix>_<secret> (check that it was copied whole)")

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// keyShape is the credential's form, its public prefix the submatch; the
// checksum at the end of the secret is checked apart.
var keyShape = regexp.MustCompile(`^agk_(?:live|test)_([0-9a-z]{12})_[0-9A-Za-z]{38}$`)

// checkKey checks the credential's form and checksum, so a truncated or
// mistyped key fails here rather than as a 401 later. It returns the
// public prefix.
func checkKey(key string) (string, error) {
	m := keyShape.FindStringSubmatch(key)
	if m == nil {
		return "", errKeyForm
	}
	sum := crc32.ChecksumIEEE([]byte(key[:len(key)-6]))
	for i := len(key) - 1; i >= len(key)-6; i-- {
		if key[i] != base62[sum%62] {
			return "", errKeyForm
		}
		sum /= 62
	}
	if sum != 0 {
		return "", errKeyForm
	}
	return m[1], nil
}

func checkBase(raw string, insecure bool) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("client: base URL: %w", err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return "", fmt.Errorf("client: base URL %q: scheme must be https or http", raw)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("client: base URL %q: want scheme://host/…/v1 without credentials, query or fragment", u.Redacted())
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	if !strings.HasSuffix(path, "/v1") {
		return "", fmt.Errorf("client: base URL %q must end in /v1", u.Redacted())
	}
	if u.Scheme == "http" && !insecure && !loopback(u.Hostname()) {
		return "", fmt.Errorf("client: refusing to send the API key in clear text to %s over http; use https (or WithInsecureHTTP on a trusted network)", u.Host)
	}
	return u.Scheme + "://" + u.Host + path, nil
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// String shows the base URL and the key's public prefix, never the secret.
func (c Client) String() string {
	return fmt.Sprintf("client.Client{base: %s, key: agk_…_%s_…}", c.base, c.prefix)
}

// Format makes every verb (%v, %+v, %#v, %s, %q, %x…) print String, so no
// formatting of a Client reveals the key.
func (c Client) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// LogValue keeps the key out of structured logs.
func (c Client) LogValue() slog.Value { return slog.StringValue(c.String()) }

// MarshalJSON keeps the key out of JSON.
func (c Client) MarshalJSON() ([]byte, error) { return json.Marshal(c.String()) }

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d): // collected unfired once unreferenced (Go 1.23)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// call is one API operation.
type call struct {
	method string
	path   string     // relative to base, starting with /
	query  url.Values // may be nil
	body   any        // marshalled once; nil sends no body
	// idempotent: the call sends an Idempotency-Key, one random key for
	// all its attempts, so that the server runs it at most once.
	idempotent bool
	// once: the server may have run the call even when no answer came and
	// has no Idempotency-Key for it (rotating a secret twice would lose
	// the first new secret and end the old one's overlap), so only a 429,
	// which ran nothing, is retried.
	once bool
}

// response is a successful exchange: status 2xx.
type response struct {
	status    int
	body      []byte
	rateLimit RateLimit
}

// do runs c with the retry policy, returning the 2xx response or an error
// (an *Error for an API answer).
func (c *Client) do(ctx context.Context, cl call) (*response, error) {
	var body []byte
	if cl.body != nil {
		b, err := json.Marshal(cl.body)
		if err != nil {
			return nil, fmt.Errorf("client: encode request: %w", err)
		}
		body = b
	}
	var key string
	if cl.idempotent {
		key = newIdempotencyKey()
	}
	var lastErr error
	for attempt := 1; ; attempt++ {
		resp, err := c.once(ctx, cl, body, key)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, joinCtx(ctx, err)
		}
		lastErr = err
		wait, retry := c.backoff(attempt, err)
		if cl.once && !rateLimited(err) {
			retry = false
		}
		if !retry || attempt >= c.retry.MaxAttempts {
			return nil, lastErr
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			// Sleeping would outlive the caller: answer now with what we know.
			return nil, lastErr
		}
		if err := c.sleep(ctx, wait); err != nil {
			return nil, joinCtx(ctx, lastErr)
		}
	}
}

// rateLimited reports whether err is a 429, which ran nothing.
func rateLimited(err error) bool {
	var apiErr *Error
	return errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusTooManyRequests
}

// joinCtx reports a call cut short by its context: it matches the
// context's error and, through errors.As, the last *Error.
func joinCtx(ctx context.Context, last error) error {
	cerr := context.Cause(ctx)
	if cerr == nil || errors.Is(last, cerr) && errors.Is(last, ctx.Err()) {
		return last
	}
	if cerr != ctx.Err() {
		// A cause (WithCancelCause, WithTimeoutCause): match it and the
		// context's own error both.
		return fmt.Errorf("client: %w: %w (last attempt: %w)", ctx.Err(), cerr, last)
	}
	return fmt.Errorf("client: %w (last attempt: %w)", cerr, last)
}

// backoff decides whether err after attempt is retried and after how long.
func (c *Client) backoff(attempt int, err error) (time.Duration, bool) {
	var apiErr *Error
	if errors.Is(err, errTooLarge) {
		// The answer came, whole or not: asking again brings the same one
		// (and would repeat a create that succeeded).
		return 0, false
	}
	if !errors.As(err, &apiErr) {
		// A transport error: the request may or may not have been served;
		// every call that is not idempotent by nature sends a key.
		return c.expBackoff(attempt), true
	}
	switch {
	case apiErr.StatusCode == http.StatusTooManyRequests:
		if apiErr.RetryAfter <= 0 || apiErr.RetryAfter > c.retry.MaxRetryAfter {
			return 0, false
		}
		return apiErr.RetryAfter, true
	case apiErr.StatusCode >= 500:
		d := c.expBackoff(attempt)
		// A 503 from a proxy may say when to come back; never sooner.
		if apiErr.RetryAfter > d && apiErr.RetryAfter <= c.retry.MaxRetryAfter {
			d = apiErr.RetryAfter
		}
		return d, true
	}
	return 0, false
}

// expBackoff is full jitter: uniform in [0, min(MaxDelay, BaseDelay·2^(attempt-1))).
func (c *Client) expBackoff(attempt int) time.Duration {
	ceil := c.retry.MaxDelay
	if attempt-1 < 32 {
		if d := c.retry.BaseDelay << (attempt - 1); d > 0 && d < ceil {
			ceil = d
		}
	}
	if ceil <= 0 {
		return 0
	}
	return time.Duration(c.jitter(int64(ceil)))
}

// once sends one request and reads its answer.
func (c *Client) once(ctx context.Context, cl call, body []byte, idemKey string) (*response, error) {
	resp, err := c.send(ctx, cl, body, "application/json", idemKey)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("client: %s %s%s: read response: %w", cl.method, c.base, cl.path, err)
	}
	if len(data) > maxBody {
		return nil, fmt.Errorf("client: %s %s%s: %w", cl.method, c.base, cl.path, errTooLarge)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return &response{status: resp.StatusCode, body: data, rateLimit: parseRateLimit(resp.Header)}, nil
	}
	return nil, parseError(resp.StatusCode, resp.Header, data)
}

// send makes one request of cl with the key: body, when not nil, is JSON;
// idemKey, when not empty, is its Idempotency-Key. Errors here and in once
// name the URL without its query: it may hold a cursor, which is harmless,
// but nothing from it is needed in an error.
func (c *Client) send(ctx context.Context, cl call, body []byte, accept, idemKey string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	target := c.base + cl.path
	if len(cl.query) > 0 {
		target += "?" + cl.query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, target, rd)
	if err != nil {
		return nil, fmt.Errorf("client: build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key.s)
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", c.userAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// Drop *url.Error's own "Get \"url\":" text, which this message says.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("client: %s %s%s: %w", cl.method, c.base, cl.path, err)
	}
	return resp, nil
}

// newIdempotencyKey is 128 random bits, as 32 hex digits.
func newIdempotencyKey() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// errTooLarge is an answer over maxBody: not the API's, and not retried.
var errTooLarge = fmt.Errorf("response larger than %d bytes", maxBody)

func parseRateLimit(h http.Header) RateLimit {
	var rl RateLimit
	rl.Limit, _ = strconv.Atoi(h.Get("X-RateLimit-Limit"))
	rl.Remaining, _ = strconv.Atoi(h.Get("X-RateLimit-Remaining"))
	if s, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil && s > 0 {
		rl.Reset = time.Unix(s, 0).UTC()
	}
	return rl
}

// maxRetryAfterHeader is the longest Retry-After taken at its word; a
// longer one, in either form, is treated as absent (so a 429 carrying it is
// not retried).
const maxRetryAfterHeader = 24 * time.Hour

// parseRetryAfter reads delay-seconds (the form the API sends) or an
// HTTP date (the form a proxy may send).
func parseRetryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 || n > int64(maxRetryAfterHeader/time.Second) {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 && d <= maxRetryAfterHeader {
			return d
		}
	}
	return 0
}

// decodeData unmarshals a {data: …} envelope into v.
func decodeData(r *response, v any) error {
	env := struct {
		Data json.RawMessage `json:"data"`
	}{}
	if err := json.Unmarshal(r.body, &env); err != nil || len(env.Data) == 0 || string(env.Data) == "null" {
		return fmt.Errorf("client: response %d is not a {\"data\": …} envelope", r.status)
	}
	if err := json.Unmarshal(env.Data, v); err != nil {
		return fmt.Errorf("client: decode response data: %w", err)
	}
	return nil
}
