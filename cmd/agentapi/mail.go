package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/agentapi/agentapi/internal/mail"
	"github.com/agentapi/agentapi/internal/store"
)

// mailConfig is serve's notice email (docs/webhooks.md, Email).
type mailConfig struct {
	server    mail.Server
	from      string
	publicURL string
}

// parseMail checks --smtp-url, --smtp-from and --public-url; nil without
// --smtp-url. No error repeats the SMTP password.
func parseMail(smtpURL, from, publicURL string) (*mailConfig, error) {
	pub, err := parsePublicURL(publicURL)
	if err != nil {
		return nil, err
	}
	if smtpURL == "" {
		if from != "" {
			return nil, errors.New("--smtp-from needs --smtp-url")
		}
		return nil, nil
	}
	srv, err := mail.ParseURL(smtpURL)
	if err != nil {
		return nil, fmt.Errorf("--smtp-url: %v", err)
	}
	if from == "" {
		return nil, errors.New("--smtp-url needs --smtp-from, the sender address (such as notices@example.com)")
	}
	if from, err = mail.ParseAddress(from); err != nil {
		return nil, fmt.Errorf("--smtp-from %v", err)
	}
	return &mailConfig{server: srv, from: from, publicURL: pub}, nil
}

// parsePublicURL is --public-url without a trailing slash: an absolute
// http(s) URL with a host and nothing after its path.
func parsePublicURL(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(s, " \t\r\n") {
		return "", errors.New("--public-url must be an absolute http:// or https:// URL such as https://agentapi.example.com")
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// startMail starts the mail worker when mail is on and returns a channel
// closed once it has stopped (at once when off). Off, the store writes no
// mail rows.
func startMail(ctx context.Context, st *store.Store, c *mailConfig, log *slog.Logger) <-chan struct{} {
	done := make(chan struct{})
	if c == nil {
		close(done)
		return done
	}
	st.SetMail(true)
	w := mail.NewWorker(st, &mail.Sender{Server: c.server}, nil, log, mail.WorkerConfig{From: c.from, PublicURL: c.publicURL})
	log.Info("mail: notice emails on", "smtp", c.server.Redacted(), "from", c.from, "public_url", c.publicURL)
	go func() { defer close(done); w.Run(ctx) }()
	return done
}
