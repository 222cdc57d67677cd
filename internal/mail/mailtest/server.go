// Package mailtest is an SMTP server for tests, on loopback: it speaks
// EHLO, STARTTLS (a self-signed certificate), AUTH PLAIN, MAIL, RCPT and
// DATA, records each message it accepts, and can be told to refuse
// (answer 451 to MAIL) or to hang (accept connections and say nothing).
package mailtest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// Message is one message the server accepted.
type Message struct {
	From string
	To   []string
	Data string // as sent, dot-unstuffed, CRLF line ends
	TLS  bool   // sent after STARTTLS (or on an implicit TLS listener)
	Auth string // the user it authenticated as, "" for none
}

// Options shape a Server.
type Options struct {
	// NoStartTLS leaves STARTTLS out of EHLO's answer.
	NoStartTLS bool
	// Implicit makes the listener TLS from the first byte (smtps://).
	Implicit bool
	// User and Password are the one login AUTH PLAIN accepts; none: AUTH
	// is not offered.
	User, Password string
	// RejectRcpt is an address RCPT TO answers 550 (no such user).
	RejectRcpt string
}

// Server is a running test SMTP server.
type Server struct {
	ln   net.Listener
	opts Options
	// Certs trusts the server's certificate (for mail.Server.TLS).
	Certs *x509.CertPool
	cert  tls.Certificate

	mu      sync.Mutex
	msgs    []Message
	refuse  bool
	hang    bool
	conns   []net.Conn
	arrived chan struct{}
	wg      sync.WaitGroup
}

// Start starts a server on 127.0.0.1; it stops when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	cert, pool := selfSigned(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("mailtest: listen: %v", err)
	}
	s := &Server{opts: opts, Certs: pool, cert: cert, arrived: make(chan struct{}, 1000)}
	if opts.Implicit {
		ln = tls.NewListener(ln, s.tlsConfig())
	}
	s.ln = ln
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.Close)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Port is the server's port.
func (s *Server) Port() string {
	_, p, _ := net.SplitHostPort(s.Addr())
	return p
}

// Refuse makes MAIL FROM answer 451 (a server that is down for mail)
// while on is true.
func (s *Server) Refuse(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = on
}

// Hang makes new connections get no greeting and no answer while on is
// true.
func (s *Server) Hang(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hang = on
}

// Messages is a copy of what the server accepted so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// Wait waits until at least n messages arrived, or d passed; it returns
// what arrived.
func (s *Server) Wait(n int, d time.Duration) []Message {
	deadline := time.After(d)
	for {
		if m := s.Messages(); len(m) >= n {
			return m
		}
		select {
		case <-s.arrived:
		case <-deadline:
			return s.Messages()
		}
	}
}

// Close stops the server and closes its connections.
func (s *Server) Close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		hang := s.hang
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			if hang {
				buf := make([]byte, 512)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}
			s.session(c)
		}()
	}
}

func (s *Server) tlsConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{s.cert}, MinVersion: tls.VersionTLS12}
}

// session is one connection's conversation.
type session struct {
	s    *Server
	c    net.Conn
	r    *bufio.Reader
	tls  bool
	auth string
	from string
	to   []string
}

func (s *Server) session(c net.Conn) {
	ss := &session{s: s, c: c, r: bufio.NewReader(c), tls: s.opts.Implicit}
	ss.reply("220 mailtest ESMTP")
	for {
		line, err := ss.r.ReadString('\n')
		if err != nil {
			return
		}
		if !ss.command(strings.TrimRight(line, "\r\n")) {
			return
		}
	}
}

func (ss *session) reply(lines ...string) {
	_, _ = ss.c.Write([]byte(strings.Join(lines, "\r\n") + "\r\n"))
}

// command answers one command line; false ends the session.
func (ss *session) command(line string) bool {
	verb, arg, _ := strings.Cut(line, " ")
	switch strings.ToUpper(verb) {
	case "EHLO", "HELO":
		ss.ehlo()
	case "STARTTLS":
		return ss.startTLS()
	case "AUTH":
		ss.authPlain(arg)
	case "MAIL":
		ss.mail(arg)
	case "RCPT":
		if a := addrOf(arg); a == ss.s.opts.RejectRcpt {
			ss.reply("550 no such user")
		} else {
			ss.to = append(ss.to, a)
			ss.reply("250 ok")
		}
	case "DATA":
		return ss.data()
	case "RSET":
		ss.from, ss.to = "", nil
		ss.reply("250 ok")
	case "NOOP":
		ss.reply("250 ok")
	case "QUIT":
		ss.reply("221 bye")
		return false
	default:
		ss.reply("502 unknown command")
	}
	return true
}

func (ss *session) ehlo() {
	lines := []string{"250-mailtest", "250-8BITMIME"}
	if !ss.tls && !ss.s.opts.NoStartTLS {
		lines = append(lines, "250-STARTTLS")
	}
	if ss.s.opts.User != "" {
		lines = append(lines, "250-AUTH PLAIN")
	}
	lines = append(lines, "250 SMTPUTF8")
	ss.reply(lines...)
}

func (ss *session) startTLS() bool {
	if ss.tls || ss.s.opts.NoStartTLS {
		ss.reply("503 no")
		return true
	}
	ss.reply("220 go ahead")
	tc := tls.Server(ss.c, ss.s.tlsConfig())
	if err := tc.Handshake(); err != nil {
		return false
	}
	ss.c, ss.r, ss.tls = tc, bufio.NewReader(tc), true
	return true
}

func (ss *session) authPlain(arg string) {
	mech, resp, _ := strings.Cut(arg, " ")
	if !strings.EqualFold(mech, "PLAIN") || ss.s.opts.User == "" {
		ss.reply("504 unsupported")
		return
	}
	raw, err := base64.StdEncoding.DecodeString(resp)
	parts := strings.Split(string(raw), "\x00")
	if err != nil || len(parts) != 3 || parts[1] != ss.s.opts.User || parts[2] != ss.s.opts.Password {
		ss.reply("535 bad credentials")
		return
	}
	ss.auth = parts[1]
	ss.reply("235 ok")
}

func (ss *session) mail(arg string) {
	ss.s.mu.Lock()
	refuse := ss.s.refuse
	ss.s.mu.Unlock()
	switch {
	case refuse:
		ss.reply("451 try again later")
	case ss.s.opts.User != "" && ss.auth == "":
		ss.reply("530 authentication required")
	default:
		ss.from, ss.to = addrOf(arg), nil
		ss.reply("250 ok")
	}
}

func (ss *session) data() bool {
	ss.reply("354 go ahead")
	var b strings.Builder
	for {
		line, err := ss.r.ReadString('\n')
		if err != nil {
			return false
		}
		if line == ".\r\n" {
			break
		}
		b.WriteString(strings.TrimPrefix(line, "."))
	}
	m := Message{From: ss.from, To: ss.to, Data: b.String(), TLS: ss.tls, Auth: ss.auth}
	ss.s.mu.Lock()
	ss.s.msgs = append(ss.s.msgs, m)
	ss.s.mu.Unlock()
	select {
	case ss.s.arrived <- struct{}{}:
	default:
	}
	ss.from, ss.to = "", nil
	ss.reply("250 queued")
	return true
}

// addrOf is the address of "FROM:<a@b>" or "TO:<a@b> …".
func addrOf(arg string) string {
	if i := strings.IndexByte(arg, '<'); i >= 0 {
		if j := strings.IndexByte(arg[i:], '>'); j >= 0 {
			return arg[i+1 : i+j]
		}
	}
	return arg
}

func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("mailtest: key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mailtest"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("mailtest: certificate: %v", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("mailtest: certificate: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}
