package mail_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/mail"
	"github.com/agentapi/agentapi/internal/mail/mailtest"
)

func TestParseURL(t *testing.T) {
	good := []struct {
		in       string
		want     mail.Server
		redacted string
	}{
		{"smtp://mail.example.com", mail.Server{Host: "mail.example.com", Port: "587"}, "smtp://mail.example.com:587"},
		{"smtps://u%40x:p%3Ass@mail.example.com:2465", mail.Server{Host: "mail.example.com", Port: "2465", Implicit: true, User: "u@x", Password: "p:ss"},
			"smtps://u%40x:xxxxx@mail.example.com:2465"},
		{"smtp://relay@127.0.0.1:25/", mail.Server{Host: "127.0.0.1", Port: "25", User: "relay"}, "smtp://relay@127.0.0.1:25"},
	}
	for _, c := range good {
		got, err := mail.ParseURL(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
		if r := got.Redacted(); r != c.redacted {
			t.Errorf("Redacted() = %q, want %q", r, c.redacted)
		}
	}
	for _, in := range []string{"http://mail.example.com", "smtp://", "smtp://h:0", "smtp://h:99999", "smtp://:pw@h", "smtp://h/path", "smtp://h?x=1", "mail.example.com:25", "::"} {
		_, err := mail.ParseURL(in + "")
		if err == nil {
			t.Errorf("ParseURL(%q) accepted", in)
			continue
		}
		if strings.Contains(err.Error(), "pw") {
			t.Errorf("the error repeats the password: %v", err)
		}
	}
}

func sender(srv *mailtest.Server, scheme, user, pass string) *mail.Sender {
	return &mail.Sender{Server: mail.Server{Host: "127.0.0.1", Port: srv.Port(), Implicit: scheme == "smtps", User: user, Password: pass,
		TLS: &tls.Config{RootCAs: srv.Certs}}, Step: 2 * time.Second, Dial: 2 * time.Second}
}

func oneMessage(t *testing.T) []byte {
	t.Helper()
	raw, err := mail.Message{From: "n@example.com", To: "o@example.com", Subject: "hi", Text: "t", HTML: "<p>h</p>", Date: time.Now()}.Build()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestSendStartTLSAndAuth: smtp:// upgrades with STARTTLS when offered and
// logs in; smtps:// is TLS from the start; without userinfo no AUTH.
func TestSendStartTLSAndAuth(t *testing.T) {
	ctx := context.Background()
	starttls := mailtest.Start(t, mailtest.Options{User: "u", Password: "pw"})
	if err := sender(starttls, "smtp", "u", "pw").Send(ctx, "n@example.com", "o@example.com", oneMessage(t)); err != nil {
		t.Fatalf("send: %v", err)
	}
	implicit := mailtest.Start(t, mailtest.Options{Implicit: true, User: "u", Password: "pw"})
	if err := sender(implicit, "smtps", "u", "pw").Send(ctx, "n@example.com", "o@example.com", oneMessage(t)); err != nil {
		t.Fatalf("send smtps: %v", err)
	}
	plain := mailtest.Start(t, mailtest.Options{NoStartTLS: true})
	if err := sender(plain, "smtp", "", "").Send(ctx, "n@example.com", "o@example.com", oneMessage(t)); err != nil {
		t.Fatalf("send plain: %v", err)
	}
	for _, c := range []struct {
		srv       *mailtest.Server
		tls       bool
		auth      string
		recipient string
	}{{starttls, true, "u", "o@example.com"}, {implicit, true, "u", "o@example.com"}, {plain, false, "", "o@example.com"}} {
		got := c.srv.Messages()
		if len(got) != 1 || got[0].TLS != c.tls || got[0].Auth != c.auth || len(got[0].To) != 1 || got[0].To[0] != c.recipient {
			t.Errorf("received %+v; want one over TLS %v as %q", got, c.tls, c.auth)
		}
	}
	if err := sender(starttls, "smtp", "u", "wrong").Send(ctx, "n@example.com", "o@example.com", oneMessage(t)); err == nil {
		t.Error("a wrong password was accepted")
	}
}

// TestSendRefusesPasswordInTheClear: a server that offers no STARTTLS
// gets no password unless it is on this machine.
func TestSendRefusesPasswordInTheClear(t *testing.T) {
	srv := mailtest.Start(t, mailtest.Options{NoStartTLS: true, User: "u", Password: "pw"})
	remote := sender(srv, "smtp", "u", "pw")
	remote.Server.Host = "mail.example.com"
	remote.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, srv.Addr())
	}
	err := remote.Send(context.Background(), "n@example.com", "o@example.com", oneMessage(t))
	if !errors.Is(err, mail.ErrPlainPassword) {
		t.Fatalf("err = %v, want ErrPlainPassword", err)
	}
	if len(srv.Messages()) != 0 {
		t.Fatal("a message was sent")
	}
	// On loopback a local relay may take it without TLS.
	if err := sender(srv, "smtp", "u", "pw").Send(context.Background(), "n@example.com", "o@example.com", oneMessage(t)); err != nil {
		t.Fatalf("loopback: %v", err)
	}
}

// TestSendTimesOutOnAHangingServer: a server that accepts and never
// answers fails the send after the step time-out, not never.
func TestSendTimesOutOnAHangingServer(t *testing.T) {
	srv := mailtest.Start(t, mailtest.Options{})
	srv.Hang(true)
	s := sender(srv, "smtp", "", "")
	s.Step = 300 * time.Millisecond
	start := time.Now()
	err := s.Send(context.Background(), "n@example.com", "o@example.com", oneMessage(t))
	if err == nil {
		t.Fatal("sent to a hanging server")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v to give up", d)
	}
}
