package main

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
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

// limitListener accepts at most cap(sem) connections at once. At the
// bound, Accept waits for one to close: new connections wait in the
// kernel's accept queue, where they cost this process nothing, and are
// served in turn (or refused by the kernel once that queue is full).
type limitListener struct {
	net.Listener
	sem    chan struct{}
	closed chan struct{}
	once   sync.Once
	log    *slog.Logger
	warned atomic.Int64 // unix seconds of the last warning
}

func limitConns(ln net.Listener, max int, log *slog.Logger) *limitListener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, max), closed: make(chan struct{}), log: log}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	default:
		l.atBound()
		select {
		case l.sem <- struct{}{}:
		case <-l.closed:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.sem }}, nil
}

// atBound logs, at most once a minute, that connections wait.
func (l *limitListener) atBound() {
	now := time.Now().Unix()
	if last := l.warned.Load(); now-last >= 60 && l.warned.CompareAndSwap(last, now) {
		l.log.Warn("connection limit reached: new connections wait for open ones to close", "max_conns", cap(l.sem))
	}
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitedConn gives its place back once, on its first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
