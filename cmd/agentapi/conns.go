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
// connections faster than the time-outs close them. Measured with the
// built binary, 4,000 connections each sending 60 KB of a header and then
// nothing: RSS +436 MiB without a bound (about 110 KiB a connection, the
// header buffer growing towards the 64 KiB limit), +69 MiB with
// --max-conns 1000; 4,000 that send a request line and stall cost about
// 4 KiB each. At this default the worst case is about 450 MiB.
const defaultMaxConns = 4096

// defaultMaxConnsPerAddr bounds one client address's share of them.
const defaultMaxConnsPerAddr = 256

// connLimit is the API listener, bounded: at most max connections open,
// and at most perAddr from one client address (clientaddr.Group: IPv6 by
// /64), trusted proxies excepted; a connection past its address's share is
// closed at once. At max, Accept closes the connection idle longest (a
// keep-alive connection between requests, as http.Server's ConnState
// reports it) to admit the new one, and waits only when none is idle.
// golang.org/x/net/netutil's LimitListener only waits, and counts no
// address: a client holding idle connections would keep others out for
// up to the idle time-out (measured at 19.8 s with 4,096 of them).
type connLimit struct {
	net.Listener
	max, perAddr int
	clients      *clientaddr.Resolver
	log          *slog.Logger

	mu     sync.Mutex
	open   int
	byAddr map[string]int
	idle   map[*limitedConn]time.Time // since when each idle connection is
	freed  chan struct{}              // a place was given back
	closed chan struct{}
	once   sync.Once
	err    error        // of closing the listener, which Close does once
	warned atomic.Int64 // unix seconds of the last warning
}

func limitConns(ln net.Listener, max, perAddr int, clients *clientaddr.Resolver, log *slog.Logger) *connLimit {
	return &connLimit{Listener: ln, max: max, perAddr: perAddr, clients: clients, log: log,
		byAddr: map[string]int{}, idle: map[*limitedConn]time.Time{}, freed: make(chan struct{}, 1), closed: make(chan struct{})}
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
			l.mu.Unlock()
			return lc
		}
		oldest := l.oldestIdle()
		l.mu.Unlock()
		if oldest != nil {
			oldest.Close() // gives its place back
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

// oldestIdle is the connection idle longest, nil when none is; l.mu held.
func (l *connLimit) oldestIdle() *limitedConn {
	var oldest *limitedConn
	for c, since := range l.idle {
		if oldest == nil || since.Before(l.idle[oldest]) {
			oldest = c
		}
	}
	delete(l.idle, oldest)
	return oldest
}

// connState is the server's ConnState hook: it keeps the idle set.
func (l *connLimit) connState(c net.Conn, s http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
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
	delete(l.idle, c)
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

// limitedConn gives its place back once, on its first Close.
type limitedConn struct {
	net.Conn
	l     *connLimit
	group string
	once  sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}
