// Package mail sends the service's notice emails (docs/webhooks.md, Email):
// it parses serve's --smtp-url, builds each message (plain text and HTML,
// headers that user input cannot add to) and hands it to an SMTP server
// with every step bounded in time, so that a server that stops answering
// costs an attempt, never a stuck worker.
package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/url"
	"strconv"
	"time"
)

// Server is where mail goes: serve's --smtp-url.
type Server struct {
	Host string
	Port string
	// Implicit is smtps://: TLS from the first byte. smtp:// upgrades
	// with STARTTLS whenever the server offers it.
	Implicit bool
	User     string
	Password string // never logged: see Redacted
	// TLS, when set, is the TLS configuration to use (tests trust their
	// own certificate with it); nil: the system's roots, verified
	// against Host.
	TLS *tls.Config
}

// ParseURL reads smtp://[user[:password]@]host[:port] (port 587 unless
// given) or smtps://… (port 465). The error never repeats the password.
func ParseURL(raw string) (Server, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Server{}, errors.New("not a URL such as smtp://user:password@mail.example.com:587")
	}
	var s Server
	switch u.Scheme {
	case "smtp":
		s.Port = "587"
	case "smtps":
		s.Port, s.Implicit = "465", true
	default:
		return Server{}, errors.New("the scheme must be smtp:// (STARTTLS when offered) or smtps:// (TLS)")
	}
	s.Host = u.Hostname()
	if s.Host == "" {
		return Server{}, errors.New("the URL names no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return Server{}, errors.New("the port must be 1 to 65535")
		}
		s.Port = p
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return Server{}, errors.New("the URL must have no path, query or fragment")
	}
	if u.User != nil {
		s.User = u.User.Username()
		s.Password, _ = u.User.Password()
		if s.User == "" {
			return Server{}, errors.New("the URL has a password but no user name")
		}
	}
	return s, nil
}

// Redacted is the server as logs and banners may show it: the password
// replaced.
func (s Server) Redacted() string {
	scheme := "smtp"
	if s.Implicit {
		scheme = "smtps"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(s.Host, s.Port)}
	if s.User != "" {
		u.User = url.User(s.User)
		if s.Password != "" {
			u.User = url.UserPassword(s.User, "xxxxx")
		}
	}
	return u.String()
}

// Loopback reports whether the host is this machine, where a password
// may travel without TLS (a local relay).
func (s Server) Loopback() bool {
	if s.Host == "localhost" {
		return true
	}
	ip := net.ParseIP(s.Host)
	return ip != nil && ip.IsLoopback()
}

// Time-outs of a send: the dial, each command's exchange (a read or a
// write that makes no progress for StepTimeout fails), and the whole
// message.
const (
	DialTimeout = 10 * time.Second
	StepTimeout = 30 * time.Second
	SendTimeout = 2 * time.Minute
)

// Sender delivers messages to one Server.
type Sender struct {
	Server Server
	// Step bounds each read and write (StepTimeout when zero); Dial the
	// connection (DialTimeout when zero).
	Step, Dial time.Duration
	// DialContext, when set, makes the TCP connection instead of a
	// net.Dialer (tests reach a named host on loopback with it).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
}

// ErrPlainPassword is the refusal to send a password over a connection
// that is not encrypted to a host that is not this machine.
var ErrPlainPassword = errors.New("the SMTP server offers no STARTTLS: the password is not sent over an unencrypted connection to a host other than this machine")

// Send delivers msg from from to the one recipient to. Every step is
// bounded: the dial by Dial, each read and write by Step, the whole by
// SendTimeout and ctx.
func (s *Sender) Send(ctx context.Context, from, to string, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, SendTimeout)
	defer cancel()
	conn, err := s.dial(ctx)
	if err != nil {
		return err
	}
	step := cmpDur(s.Step, StepTimeout)
	sc := &stepConn{Conn: conn, step: step}
	// The context's end closes the connection, which ends a step in
	// progress at once.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	c, err := smtp.NewClient(sc, s.Server.Host)
	if err != nil {
		conn.Close()
		return fmt.Errorf("smtp greeting: %w", err)
	}
	defer c.Close()
	if err := s.session(c, from, to, msg); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w (%v)", err, context.Cause(ctx))
		}
		return err
	}
	return nil
}

func (s *Sender) dial(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{Timeout: cmpDur(s.Dial, DialTimeout)}
	dial := d.DialContext
	if s.DialContext != nil {
		dial = s.DialContext
	}
	dctx, cancel := context.WithTimeout(ctx, cmpDur(s.Dial, DialTimeout))
	defer cancel()
	conn, err := dial(dctx, "tcp", net.JoinHostPort(s.Server.Host, s.Server.Port))
	if err != nil {
		return nil, fmt.Errorf("smtp dial: %w", err)
	}
	if !s.Server.Implicit {
		return conn, nil
	}
	// The handshake is a step like any other: bounded.
	_ = conn.SetDeadline(time.Now().Add(cmpDur(s.Step, StepTimeout)))
	tc := tls.Client(conn, s.tlsConfig())
	if err := tc.HandshakeContext(dctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("smtp TLS: %w", err)
	}
	_ = conn.SetDeadline(time.Time{})
	return tc, nil
}

func (s *Sender) tlsConfig() *tls.Config {
	if s.Server.TLS != nil {
		c := s.Server.TLS.Clone()
		if c.ServerName == "" {
			c.ServerName = s.Server.Host
		}
		return c
	}
	return &tls.Config{ServerName: s.Server.Host, MinVersion: tls.VersionTLS12}
}

// session is the conversation after the greeting: EHLO, STARTTLS when
// offered, AUTH when the URL has a user, then the message.
func (s *Sender) session(c *smtp.Client, from, to string, msg []byte) error {
	if err := c.Hello("localhost"); err != nil {
		return fmt.Errorf("smtp EHLO: %w", err)
	}
	encrypted := s.Server.Implicit
	if !encrypted {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(s.tlsConfig()); err != nil {
				return fmt.Errorf("smtp STARTTLS: %w", err)
			}
			encrypted = true
		}
	}
	if s.Server.User != "" {
		if !encrypted && !s.Server.Loopback() {
			return ErrPlainPassword
		}
		if err := c.Auth(plainAuth{s.Server.User, s.Server.Password}); err != nil {
			return fmt.Errorf("smtp AUTH: %w", err)
		}
	}
	if err := c.Mail(from); err != nil {
		return fmt.Errorf("smtp MAIL FROM: %w", err)
	}
	if err := c.Rcpt(to); err != nil {
		return fmt.Errorf("smtp RCPT TO: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	_ = c.Quit() // the message is accepted: a failed QUIT does not undo it
	return nil
}

func cmpDur(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// stepConn gives every read and write its own deadline: a server that
// stops answering mid-conversation fails the step after step.
type stepConn struct {
	net.Conn
	step time.Duration
}

func (c *stepConn) Read(p []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.step))
	return c.Conn.Read(p)
}

func (c *stepConn) Write(p []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.step))
	return c.Conn.Write(p)
}

// plainAuth is AUTH PLAIN. net/smtp's PlainAuth has its own rule for
// unencrypted connections (only to a host named localhost); session
// applies ours (Loopback) before it is used.
type plainAuth struct{ user, password string }

func (a plainAuth) Start(*smtp.ServerInfo) (string, []byte, error) {
	return "PLAIN", []byte("\x00" + a.user + "\x00" + a.password), nil
}

func (a plainAuth) Next(_ []byte, more bool) ([]byte, error) {
	if more {
		return nil, errors.New("unexpected server challenge")
	}
	return nil, nil
}
