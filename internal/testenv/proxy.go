package testenv

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy is a loopback TCP proxy to a service that a test can cut (close
// every connection and refuse new ones), stall (keep every connection open
// and pass nothing), and restore, to play an outage.
type Proxy struct {
	ln     net.Listener
	target string
	up     atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
	// flowing is closed while bytes pass; a stall replaces it with an
	// open channel that the copy loops wait on.
	flowing chan struct{}
}

// NewProxy listens on 127.0.0.1 and forwards to target ("host:port").
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, flowing: make(chan struct{})}
	close(p.flowing)
	p.up.Store(true)
	t.Cleanup(func() { ln.Close(); p.Restore(); p.Cut() })
	go p.serve()
	return p
}

// Addr is the proxy's "host:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.up.Load() {
			c.Close()
			continue
		}
		go p.forward(c)
	}
}

// forward connects c to the target once bytes flow (a connection made
// during a stall is accepted and left waiting, as a hung host's kernel
// accepts it), then copies both ways.
func (p *Proxy) forward(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
	p.wait()
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, u)
	p.mu.Unlock()
	go func() { _, _ = io.Copy(u, stalling{p, c}); u.Close() }()
	go func() { _, _ = io.Copy(c, stalling{p, u}); c.Close() }()
}

// wait returns once bytes flow.
func (p *Proxy) wait() {
	p.mu.Lock()
	ch := p.flowing
	p.mu.Unlock()
	<-ch
}

// stalling is src read by copy: each chunk read is held while the proxy
// is stalled.
type stalling struct {
	p   *Proxy
	src io.Reader
}

func (s stalling) Read(b []byte) (int, error) {
	n, err := s.src.Read(b)
	if n > 0 {
		s.p.wait()
	}
	return n, err
}

// Cut closes every open connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.up.Store(false)
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
}

// Stall keeps every connection open and passes nothing, new connections
// included, until Restore: a service stopped with SIGSTOP, or whose host
// hangs, rather than one that refuses.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flowing:
		p.flowing = make(chan struct{})
	default: // already stalled
	}
}

// Restore accepts connections again and lets bytes flow.
func (p *Proxy) Restore() {
	p.up.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flowing:
	default:
		close(p.flowing)
	}
}

// SilentListener accepts connections and never answers: a Proxy stalled
// for good (Stall), with nowhere to forward to. It returns the
// "host:port"; the listener and every connection close with the test.
func SilentListener(t testing.TB) string {
	t.Helper()
	p := NewProxy(t, "")
	p.Stall()
	return p.Addr()
}
