package main

import (
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentapi/agentapi/internal/clientaddr"
)

// defaultMaxConns bounds the connections serve holds open at once, and so
// the memory that clients, or an attacker, can make it hold by opening
// connections faster than the time-outs close them. What a connection
// costs, measured with the built binary (docs/configuration.md, Tune
// memory): about 8 KiB while it sends nothing or sits idle; up to about
// 350 KiB of RSS while it holds a header near maxHeaderBytes made of
// thousands of short fields (net/http parses each into an entry of the
// header map, and the collector lets the heap grow to about twice what is
// live); about 1 MiB under the former 64 KiB limit. TestStalledHeadersBoundRSS
// checks the figure.
const defaultMaxConns = 4096

// defaultMaxConnsPerAddr bounds one client address's share of them.
const defaultMaxConnsPerAddr = 256

// connLimit is the API listener, bounded: at most max connections open,
// and at most perAddr from one client address (clientaddr.Group: IPv6 by
// /64), trusted proxies excepted; a connection past its address's share is
// closed at once. At max, Accept closes one connection to admit the new
// one (victim) and waits only when every open one is in the middle of a
// request. golang.org/x/net/netutil's LimitListener only waits, and counts
// no address: connections that never finish their headers, or idle ones,
// would keep others out until a time-out closed them (a new client waited
// up to 9.2 s behind 5,120 that sent nothing or dripped their headers, and
// 19.8 s behind 4,096 idle ones).
type connLimit struct {
	net.Listener
	max, perAddr int
	clients      *clientaddr.Resolver
	log          *slog.Logger
	start        time.Time     // limitedConn.progress counts from it
	grace        time.Duration // stallGrace; tests shorten it

	mu      sync.Mutex
	open    int
	byAddr  map[string]int
	pending map[*limitedConn]struct{}  // still reading their first request's headers
	idle    map[*limitedConn]time.Time // since when each idle connection is
	freed   chan struct{}              // a place was given back
	closed  chan struct{}
	once    sync.Once
	err     error        // of closing the listener, which Close does once
	warned  atomic.Int64 // unix seconds of the last warning
}

// stallGrace is how long a connection may go without sending a byte of its
// first request's headers before it is closed ahead of any idle one. A
// client's headers follow its connection within a round trip, so one still
// silent after a second is almost surely holding a place; a younger one is
// more likely a client about to be served than an idle keep-alive is
// (whose client reconnects without a fuss).
const stallGrace = time.Second

func limitConns(ln net.Listener, max, perAddr int, clients *clientaddr.Resolver, log *slog.Logger) *connLimit {
	return &connLimit{Listener: ln, max: max, perAddr: perAddr, clients: clients, log: log, start: time.Now(), grace: stallGrace,
		byAddr: map[string]int{}, pending: map[*limitedConn]struct{}{}, idle: map[*limitedConn]time.Time{},
		freed: make(chan struct{}, 1), closed: make(chan struct{})}
}

func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// admit counts c in and returns it, or closes it and returns nil.
func (l *connLimit) admit(c net.Conn) *limitedConn {
	lc := &limitedConn{Conn: c, l: l, group: l.group(c)}
	lc.pending.Store(true)
	for {
		l.mu.Lock()
		if lc.group != "" && l.byAddr[lc.group] >= l.perAddr {
			l.mu.Unlock()
			l.warn("connections refused: a client address holds --max-conns-per-addr", "max_conns_per_addr", l.perAddr)
			c.Close()
			return nil
		}
		if l.open < l.max {
			l.open++
			l.byAddr[lc.group]++
			lc.progress.Store(int64(time.Since(l.start)))
			l.pending[lc] = struct{}{}
			l.mu.Unlock()
			return lc
		}
		victim, why := l.victim()
		l.mu.Unlock()
		if victim != nil {
			l.warn("connection limit reached: "+why+" closed to admit new ones", "max_conns", l.max)
			victim.Close() // gives its place back
			continue
		}
		l.warn("connection limit reached: new connections wait for open ones to close", "max_conns", l.max)
		select {
		case <-l.freed:
		case <-l.closed:
			c.Close()
			return nil
		}
	}
}

// group is c's client address group; "" for a trusted proxy, whose
// connections carry many clients.
func (l *connLimit) group(c net.Conn) string {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil || l.clients.Trusts(ap.Addr()) {
		return ""
	}
	return clientaddr.Group(ap.Addr().Unmap().String())
}

// victim is the connection to close for a new one, and what it was; nil
// when every open connection is in the middle of a request. l.mu held.
// First one that has not sent a byte of its first request's headers for
// stallGrace (the one stalled longest): it never finished a request, and
// it is what clients that hold places without using them (sending
// nothing, dripping a header line every few seconds, stalling after a
// large header) look like. Then the connection idle longest. Then the
// one stalled longest, however briefly.
func (l *connLimit) victim() (*limitedConn, string) {
	stalled := l.stalledLongest()
	if stalled != nil && time.Since(l.start)-time.Duration(stalled.progress.Load()) >= l.grace {
		return l.drop(stalled), "connections that had not finished their headers"
	}
	if idle := l.oldestIdle(); idle != nil {
		return l.drop(idle), "idle keep-alive connections"
	}
	if stalled != nil {
		return l.drop(stalled), "connections that had not finished their headers"
	}
	return nil, ""
}

// stalledLongest is the pending connection whose last byte came earliest,
// nil when none is pending; l.mu held.
func (l *connLimit) stalledLongest() *limitedConn {
	var worst *limitedConn
	var at int64
	for c := range l.pending {
		if p := c.progress.Load(); worst == nil || p < at {
			worst, at = c, p
		}
	}
	return worst
}

// oldestIdle is the connection idle longest, nil when none is; l.mu held.
func (l *connLimit) oldestIdle() *limitedConn {
	var oldest *limitedConn
	for c, since := range l.idle {
		if oldest == nil || since.Before(l.idle[oldest]) {
			oldest = c
		}
	}
	return oldest
}

// drop takes c out of the pending and idle sets, so that no other admit
// picks it while it closes; l.mu held.
func (l *connLimit) drop(c *limitedConn) *limitedConn {
	delete(l.pending, c)
	delete(l.idle, c)
	return c
}

// connState is the server's ConnState hook: it keeps the pending and idle
// sets. http.Server reports StateActive once a request's headers are read,
// so a connection leaves pending when its first request's have been (or it
// closes).
func (l *connLimit) connState(c net.Conn, s http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok || s == http.StateNew {
		return
	}
	// Only a connection's first request finds it pending: the rest cost a
	// load, not a store and a map delete.
	pending := lc.pending.Load()
	if pending {
		lc.pending.Store(false)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if pending {
		delete(l.pending, lc)
	}
	if s == http.StateIdle {
		l.idle[lc] = time.Now()
	} else {
		delete(l.idle, lc)
	}
}

func (l *connLimit) release(c *limitedConn) {
	l.mu.Lock()
	l.open--
	if l.byAddr[c.group]--; l.byAddr[c.group] == 0 {
		delete(l.byAddr, c.group)
	}
	l.drop(c)
	l.mu.Unlock()
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// warn logs msg at most once a minute.
func (l *connLimit) warn(msg string, args ...any) {
	now := time.Now().Unix()
	if last := l.warned.Load(); now-last >= 60 && l.warned.CompareAndSwap(last, now) {
		l.log.Warn(msg, args...)
	}
}

// Close closes the listener once: a stop closes it before
// http.Server.Shutdown closes it again.
func (l *connLimit) Close() error {
	l.once.Do(func() {
		close(l.closed)
		l.err = l.Listener.Close()
	})
	return l.err
}

// wait returns once every connection has closed, or after max.
func (l *connLimit) wait(max time.Duration) {
	for deadline := time.Now().Add(max); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		l.mu.Lock()
		open := l.open
		l.mu.Unlock()
		if open == 0 {
			return
		}
	}
}

// limitedConn gives its place back once, on its first Close, and notes
// when it last read a byte while its first request's headers are awaited.
type limitedConn struct {
	net.Conn
	l        *connLimit
	group    string
	once     sync.Once
	pending  atomic.Bool  // its first request's headers are not all read
	progress atomic.Int64 // when it last read a byte while pending: time since l.start
}

// Read notes progress only while pending: once the first request's
// headers are read, a Read costs one atomic load more than the bare conn's.
func (c *limitedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.pending.Load() {
		c.progress.Store(int64(time.Since(c.l.start)))
	}
	return n, err
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}
