package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every test talks to loopback only. Names resolve through fakeResolver,
// and where a test resolves a name to a public address, dialHook records
// the address and connects to a loopback test server instead.

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// publicAddr stands for an internet address; nothing is ever sent to it.
var publicAddr = netip.MustParseAddr("93.184.215.14")

// fakeResolver answers lookups from a script, one answer per call (the last
// one repeats), and counts them.
type fakeResolver struct {
	mu      sync.Mutex
	answers [][]netip.Addr
	err     error
	calls   int
}

func (r *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.err != nil {
		return nil, r.err
	}
	i := min(r.calls-1, len(r.answers)-1)
	return r.answers[i], nil
}

func (r *fakeResolver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

func resolverOf(addrs ...string) *fakeResolver {
	var as []netip.Addr
	for _, a := range addrs {
		as = append(as, netip.MustParseAddr(a))
	}
	return &fakeResolver{answers: [][]netip.Addr{as}}
}

// dialHook records where the client dials and connects to target (a
// loopback listener) instead; with no target it refuses and fails the test.
type dialHook struct {
	t      *testing.T
	target string
	mu     sync.Mutex
	dialed []string
}

func (h *dialHook) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	h.mu.Lock()
	h.dialed = append(h.dialed, addr)
	h.mu.Unlock()
	if h.target == "" {
		h.t.Errorf("dialed %s, want no connection at all", addr)
		return nil, errors.New("test: no dial expected")
	}
	return (&net.Dialer{}).DialContext(ctx, network, h.target)
}

func (h *dialHook) addrs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.dialed...)
}

// newTestClient is New with the dial hook in place and, when srv is a TLS
// test server, its certificate trusted.
func newTestClient(t *testing.T, cfg Config, hook *dialHook, srv *httptest.Server) *Client {
	t.Helper()
	c := New(cfg)
	if hook != nil {
		hook.t = t
		c.dial = hook.dial
	}
	if srv != nil && srv.TLS != nil {
		pool := x509.NewCertPool()
		pool.AddCert(srv.Certificate())
		c.http.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	t.Cleanup(c.http.CloseIdleConnections)
	return c
}

// countingServer answers 200 "ok" and counts the requests that reached it.
func countingServer(t *testing.T, tlsServer bool) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		_, _ = io.WriteString(w, "ok")
	})
	srv := httptest.NewUnstartedServer(h)
	// The bad-certificate test makes the server log the refused handshake.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tlsServer {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &n
}

func wantClass(t *testing.T, res Result, err error, class string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Class != class || res.Class != class {
		t.Fatalf("Post = %+v, %v; want class %q", res, err, class)
	}
	if res.StatusCode != 0 {
		t.Fatalf("status %d with a failed attempt", res.StatusCode)
	}
}

func TestLoopbackRefusedWithoutAllow(t *testing.T) {
	for _, tlsServer := range []bool{false, true} {
		srv, hits := countingServer(t, tlsServer)
		c := newTestClient(t, Config{}, &dialHook{}, srv)
		res, err := c.Post(context.Background(), srv.URL, nil, []byte(`{}`))
		wantClass(t, res, err, ClassAddressNotAllowed)
		if hits.Load() != 0 {
			t.Fatalf("%s reached the server", srv.URL)
		}
	}
}

func TestAllowReachesLoopbackOverHTTP(t *testing.T) {
	var got *http.Request
	var gotBody []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		gotBody, _ = io.ReadAll(r.Body)
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	c := newTestClient(t, Config{Allow: loopback, UserAgent: "agentapi-webhooks/test"}, nil, nil)
	h := http.Header{"Webhook-Id": {"evt_1"}}
	res, err := c.Post(context.Background(), srv.URL+"/hook", h, []byte(`{"a":1}`))
	if err != nil || res.StatusCode != http.StatusAccepted || res.Class != "" {
		t.Fatalf("Post = %+v, %v; want 202", res, err)
	}
	if res.Header.Get("Retry-After") != "7" || res.Latency <= 0 {
		t.Fatalf("result header %v, latency %s", res.Header, res.Latency)
	}
	checkSent(t, got, gotBody)
}

func checkSent(t *testing.T, r *http.Request, body []byte) {
	t.Helper()
	if r.Method != http.MethodPost || r.URL.Path != "/hook" || string(body) != `{"a":1}` {
		t.Fatalf("server got %s %s %q", r.Method, r.URL.Path, body)
	}
	want := map[string]string{"User-Agent": "agentapi-webhooks/test", "Content-Type": "application/json", "Webhook-Id": "evt_1"}
	for k, v := range want {
		if r.Header.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, r.Header.Get(k), v)
		}
	}
}

func TestHTTPOnlyInsideAllow(t *testing.T) {
	// https:// to a public address is fine; http:// to it is not, even
	// when some other range is allowed.
	c := newTestClient(t, Config{Allow: loopback, Resolver: resolverOf(publicAddr.String())}, &dialHook{}, nil)
	res, err := c.Post(context.Background(), "http://hooks.example.com/x", nil, nil)
	wantClass(t, res, err, ClassAddressNotAllowed)
	for _, u := range []string{"ftp://hooks.example.com/x", "hooks.example.com/x", "https:///x", "https://bücher.example/x", "://x"} {
		res, err := c.Post(context.Background(), u, nil, nil)
		wantClass(t, res, err, ClassAddressNotAllowed)
	}
}

func TestNamesResolvingToInternalAddressesAreRefused(t *testing.T) {
	answers := [][]string{
		{"10.0.0.5"},
		{"192.168.1.1"},
		{"127.0.0.1"},
		{"::1"},
		{"::ffff:127.0.0.1"},
		{"169.254.169.254"},
		{"fd00:ec2::254"},
		{"100.100.100.200"},
		{"64:ff9b::a00:1"},
		// One internal address among public ones refuses the whole answer.
		{publicAddr.String(), "10.0.0.5"},
		{"2606:4700:4700::1111", "fe80::1"},
	}
	for _, a := range answers {
		res := resolverOf(a...)
		c := newTestClient(t, Config{Resolver: res}, &dialHook{}, nil)
		r, err := c.Post(context.Background(), "https://hooks.example.com/x", nil, nil)
		wantClass(t, r, err, ClassAddressNotAllowed)
		if res.count() != 1 {
			t.Fatalf("%v: %d lookups, want 1", a, res.count())
		}
	}
}

// TestDialGoesToTheCheckedAddress: the name is looked up once per attempt
// and the connection goes to the address that lookup returned and the check
// passed, so a resolver that changes its answer (DNS rebinding) cannot
// steer a checked attempt to an internal address.
func TestDialGoesToTheCheckedAddress(t *testing.T) {
	var serverName atomic.Value
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serverName.Store(r.TLS.ServerName)
	}))
	t.Cleanup(srv.Close)
	res := &fakeResolver{answers: [][]netip.Addr{{publicAddr}, {netip.MustParseAddr("127.0.0.1")}}}
	hook := &dialHook{target: srv.Listener.Addr().String()}
	c := newTestClient(t, Config{Resolver: res}, hook, srv)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	u := "https://hooks.example.com:" + port + "/x"

	r, err := c.Post(context.Background(), u, nil, []byte(`{}`))
	if err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("first attempt: %+v, %v", r, err)
	}
	if got := hook.addrs(); len(got) != 1 || got[0] != net.JoinHostPort(publicAddr.String(), port) {
		t.Fatalf("dialed %v, want only the checked %s", got, publicAddr)
	}
	if res.count() != 1 {
		t.Fatalf("%d lookups for one attempt, want 1", res.count())
	}
	// The certificate was verified against the name, not the address.
	if serverName.Load() != "hooks.example.com" {
		t.Fatalf("TLS server name %v, want hooks.example.com", serverName.Load())
	}

	// The name now points inside: the next attempt looks it up again and
	// is refused before anything is sent, pooled connection or not.
	r, err = c.Post(context.Background(), u, nil, []byte(`{}`))
	wantClass(t, r, err, ClassAddressNotAllowed)
	if res.count() != 2 || len(hook.addrs()) != 1 {
		t.Fatalf("second attempt: %d lookups, dials %v", res.count(), hook.addrs())
	}
}

func TestDialWithoutACheckIsRefused(t *testing.T) {
	c := newTestClient(t, Config{}, &dialHook{}, nil)
	_, err := c.dialChecked(context.Background(), "tcp", "127.0.0.1:80")
	if !errors.Is(err, errNotAllowed) {
		t.Fatalf("dial without a check: %v", err)
	}
	ctx := withChecked(context.Background(), "hooks.example.com", []netip.Addr{publicAddr})
	if _, err := c.dialChecked(ctx, "tcp", "other.example.com:443"); !errors.Is(err, errNotAllowed) {
		t.Fatalf("dial of another host: %v", err)
	}
}

func TestRedirectIsNotFollowed(t *testing.T) {
	var followed atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) { followed.Add(1) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := newTestClient(t, Config{Allow: loopback}, nil, nil)
	res, err := c.Post(context.Background(), srv.URL+"/hook", nil, []byte(`{}`))
	if err != nil || res.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("Post = %+v, %v; want the 307 itself", res, err)
	}
	if followed.Load() != 0 {
		t.Fatal("the redirect was followed")
	}
}

// hangingServer accepts the request and, after writing what first writes,
// waits until the test ends.
func hangingServer(t *testing.T, first func(w http.ResponseWriter)) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if first != nil {
			first(w)
			w.(http.Flusher).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before Close
	return srv
}

func TestHangingServerTimesOut(t *testing.T) {
	srv := hangingServer(t, nil)
	const timeout = 300 * time.Millisecond
	c := newTestClient(t, Config{Allow: loopback, Timeout: timeout}, nil, nil)
	start := time.Now()
	res, err := c.Post(context.Background(), srv.URL, nil, []byte(`{}`))
	took := time.Since(start)
	wantClass(t, res, err, ClassTimeout)
	if took < timeout || took > timeout+2*time.Second {
		t.Fatalf("took %s with a %s time-out", took, timeout)
	}
	if res.Latency < timeout {
		t.Fatalf("latency %s, want at least the time-out", res.Latency)
	}
}

func TestAnswerCutShortKeepsItsStatus(t *testing.T) {
	srv := hangingServer(t, func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "partial")
	})
	c := newTestClient(t, Config{Allow: loopback, Timeout: 300 * time.Millisecond}, nil, nil)
	res, err := c.Post(context.Background(), srv.URL, nil, []byte(`{}`))
	if err != nil || res.StatusCode != http.StatusOK || string(res.Body) != "partial" {
		t.Fatalf("Post = %+v, %v; want 200 with the part that came", res, err)
	}
}

func TestClosedPortIsConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := newTestClient(t, Config{Allow: loopback}, nil, nil)
	res, err := c.Post(context.Background(), "http://"+addr+"/x", nil, nil)
	wantClass(t, res, err, ClassConnectionRefused)
}

func TestBadCertificateIsTLS(t *testing.T) {
	srv, hits := countingServer(t, true)
	// The test server's certificate is not trusted by this client.
	c := newTestClient(t, Config{Allow: loopback}, nil, nil)
	res, err := c.Post(context.Background(), srv.URL, nil, nil)
	wantClass(t, res, err, ClassTLS)
	if hits.Load() != 0 {
		t.Fatal("the request went through an untrusted certificate")
	}
}

func TestGoodCertificateOverAllowedLoopback(t *testing.T) {
	srv, hits := countingServer(t, true)
	c := newTestClient(t, Config{Allow: loopback}, nil, srv)
	res, err := c.Post(context.Background(), srv.URL, nil, nil)
	if err != nil || res.StatusCode != http.StatusOK || string(res.Body) != "ok" || hits.Load() != 1 {
		t.Fatalf("Post = %+v, %v; want 200 ok", res, err)
	}
}

func TestDNSFailures(t *testing.T) {
	notFound := &net.DNSError{Err: "no such host", Name: "nowhere.example.com", IsNotFound: true}
	for _, r := range []*fakeResolver{{err: notFound}, {answers: [][]netip.Addr{{}}}} {
		c := newTestClient(t, Config{Resolver: r}, &dialHook{}, nil)
		res, err := c.Post(context.Background(), "https://nowhere.example.com/x", nil, nil)
		wantClass(t, res, err, ClassDNS)
	}
	timedOut := &net.DNSError{Err: "i/o timeout", Name: "slow.example.com", IsTimeout: true}
	c := newTestClient(t, Config{Resolver: &fakeResolver{err: timedOut}}, &dialHook{}, nil)
	res, err := c.Post(context.Background(), "https://slow.example.com/x", nil, nil)
	wantClass(t, res, err, ClassTimeout)
}

func TestOtherFailuresAreConnectionErrors(t *testing.T) {
	// A server that closes the connection without answering.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = conn.Read(make([]byte, 1024))
			conn.Close()
		}
	}()
	c := newTestClient(t, Config{Allow: loopback}, nil, nil)
	res, err := c.Post(context.Background(), "http://"+l.Addr().String()+"/x", nil, []byte(`{}`))
	wantClass(t, res, err, ClassConnectionError)
}

func TestNextAddressWhenOneRefuses(t *testing.T) {
	srv, hits := countingServer(t, false)
	closed, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 on this machine: %v", err)
	}
	_, port, _ := net.SplitHostPort(closed.Addr().String())
	closed.Close()
	// The server listens on 127.0.0.1 at another port: serve it on the
	// closed port's number by dialing through a hook for 127.0.0.1 only.
	c := newTestClient(t, Config{Allow: loopback, Resolver: resolverOf("127.0.0.2", "127.0.0.1")}, nil, nil)
	var dialed []string
	c.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed = append(dialed, addr)
		if strings.HasPrefix(addr, "127.0.0.1:") {
			addr = srv.Listener.Addr().String()
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	res, err := c.Post(context.Background(), "http://hooks.internal:"+port+"/x", nil, nil)
	if err != nil || res.StatusCode != http.StatusOK || hits.Load() != 1 {
		t.Fatalf("Post = %+v, %v; dialed %v", res, err, dialed)
	}
	if len(dialed) != 2 {
		t.Fatalf("dialed %v, want 127.0.0.2 then 127.0.0.1", dialed)
	}
}

func TestLargeAnswerIsCut(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 200<<10/16) // 200 KiB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(big)
	}))
	t.Cleanup(srv.Close)
	c := newTestClient(t, Config{Allow: loopback}, nil, nil)
	res, err := c.Post(context.Background(), srv.URL, nil, nil)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("Post = %+v, %v", res, err)
	}
	if !bytes.Equal(res.Body, big[:DefaultKeep]) {
		t.Fatalf("kept %d bytes, want the first %d", len(res.Body), DefaultKeep)
	}
}

// countingReader is an endless answer that counts what is read of it.
type countingReader struct{ n int64 }

func (r *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	r.n += int64(len(p))
	return len(p), nil
}

func TestReadBodyReadsAtMostMaxBody(t *testing.T) {
	for _, cfg := range []Config{{}, {MaxBody: 4096, Keep: 100}, {MaxBody: 10, Keep: 100}} {
		c := New(cfg)
		r := &countingReader{}
		kept := c.readBody(r)
		if r.n > c.maxBody {
			t.Errorf("%+v: read %d bytes, want at most %d", cfg, r.n, c.maxBody)
		}
		if int64(len(kept)) != min(int64(c.keep), c.maxBody) {
			t.Errorf("%+v: kept %d bytes", cfg, len(kept))
		}
	}
	if c := New(Config{}); c.maxBody != 64<<10 || c.keep != 1<<10 || c.timeout != 15*time.Second {
		t.Fatalf("defaults: %d, %d, %s", c.maxBody, c.keep, c.timeout)
	}
}

func TestCheckURL(t *testing.T) {
	cases := []struct {
		allow []netip.Prefix
		url   string
		ok    bool
	}{
		{nil, "https://hooks.example.com/x", true},
		{nil, "https://93.184.215.14/x", true},
		{nil, "https://[2606:4700:4700::1111]/x", true},
		{nil, "http://hooks.example.com/x", false},
		{nil, "https://127.0.0.1/x", false},
		{nil, "https://[::ffff:10.0.0.1]/x", false},
		{nil, "https://169.254.169.254/latest/meta-data", false},
		{nil, "ftp://hooks.example.com/x", false},
		{nil, "https:///x", false},
		{nil, "not a url", false},
		{loopback, "http://127.0.0.1:8080/x", true},
		{loopback, "http://hooks.internal/x", true}, // checked at every attempt
		{loopback, "http://93.184.215.14/x", false},
	}
	for _, c := range cases {
		err := New(Config{Allow: c.allow}).CheckURL(c.url)
		if (err == nil) != c.ok {
			t.Errorf("CheckURL(%q) with allow %v = %v, want ok %v", c.url, c.allow, err, c.ok)
		}
	}
}
