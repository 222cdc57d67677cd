package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	netmail "net/mail"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/mail/mailtest"
	"github.com/agentapi/agentapi/internal/secretscan"
	"github.com/agentapi/agentapi/internal/secretscan/secretscantest"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// mailBody is a received message's subject and its text and HTML parts,
// decoded.
func mailBody(t *testing.T, raw string) (subject, text, html string) {
	t.Helper()
	m, err := netmail.ReadMessage(strings.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	subject, _ = new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	_, params, _ := mime.ParseMediaType(m.Header.Get("Content-Type"))
	mr := multipart.NewReader(m.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err != nil {
			break
		}
		b, _ := io.ReadAll(p)
		if strings.HasPrefix(p.Header.Get("Content-Type"), "text/html") {
			html = string(b)
		} else {
			text = string(b)
		}
	}
	return subject, text, html
}

// TestLeakReportIsMailed, with the built binary: serve with --smtp-url to
// a test SMTP server on loopback (a password without TLS: allowed to this
// machine only); a leak report revokes a key, and its Owner and Admin each
// get one email naming the key and its prefix, with the console link under
// --public-url, and no secret; the agent user gets none; the password is
// in no log line.
func TestLeakReportIsMailed(t *testing.T) {
	srv := mailtest.Start(t, mailtest.Options{NoStartTLS: true, User: "relay", Password: "s3cret-smtp-pw"})
	db := filepath.Join(t.TempDir(), "mail.db")
	gh := secretscantest.NewSigner(t, "gh-1")
	keysFile := filepath.Join(t.TempDir(), "github-keys.json")
	secretscantest.WriteKeys(t, keysFile, 0, gh)
	s := startServer(t, []string{"AGENTAPI_SMTP_FROM=notices@agentapi.example.com"}, "--db", db, "--secret-scanning-keys", keysFile,
		"--smtp-url", "smtp://relay:s3cret-smtp-pw@127.0.0.1:"+srv.Port(), "--public-url", "https://agentapi.example.com/")

	acct := mustCLI(t, db, "", "account", "create", "--name", "Mailed")
	for _, u := range [][2]string{{"owner@example.com", "owner"}, {"admin@example.com", "admin"}, {"bot@example.com", "agent"}} {
		mustCLI(t, db, "long enough password\n", "user", "create", "--account", acct, "--email", u[0], "--role", u[1])
	}
	var k struct{ ID, Prefix, Credential string }
	if err := json.Unmarshal([]byte(mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "owner@example.com",
		"--name", "Deploy <prod>", "--preset", "full-access", "--json")), &k); err != nil {
		t.Fatal(err)
	}
	if k.Prefix == "" || k.Credential == "" {
		t.Fatalf("key create --json: %+v", k)
	}
	report := secretscantest.Report(t, secretscan.Entry{Token: k.Credential, Type: "agentapi_api_key",
		URL: "https://github.com/octo/leak/blob/main/config.py", Source: "content"})
	if code, body := postReport(t, s.base, report, gh); code != 200 {
		t.Fatalf("report: %d %s", code, body)
	}

	msgs := srv.Wait(2, 20*time.Second)
	var to []string
	for _, m := range msgs {
		to = append(to, m.To...)
		wantLeakMail(t, m, k.ID, k.Prefix, k.Credential)
	}
	slices.Sort(to)
	if !slices.Equal(to, []string{"admin@example.com", "owner@example.com"}) {
		t.Fatalf("mailed %v, want the Owner and the Admin", to)
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(srv.Messages()); n != 2 {
		t.Fatalf("%d messages, want 2", n)
	}
	logs := s.stderr.String()
	if strings.Contains(logs, "s3cret-smtp-pw") || !strings.Contains(logs, "smtp://relay:xxxxx@127.0.0.1:") {
		t.Fatalf("the log shows the password, or not the redacted URL:\n%s", logs)
	}
}

// wantLeakMail checks a leaked key's email: its name (escaped in the
// HTML), prefix and console link, sent as the relay's user, no credential.
func wantLeakMail(t *testing.T, m mailtest.Message, id, prefix, credential string) {
	t.Helper()
	subject, text, html := mailBody(t, m.Data)
	for _, want := range []string{"Deploy <prod>", prefix, "https://agentapi.example.com/console/developers/keys/" + id} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if !strings.Contains(subject, "Deploy <prod>") || !strings.Contains(html, "Deploy &lt;prod&gt;") {
		t.Errorf("subject %q, HTML:\n%s", subject, html)
	}
	if strings.Contains(m.Data+text+html, credential) || m.Auth != "relay" {
		t.Errorf("the credential is in the mail, or it was not sent as relay (%q)", m.Auth)
	}
}

// TestServeRefusesBadMailFlags: --smtp-url without --smtp-from, a bad
// --smtp-from or --public-url, or a URL that is not smtp(s) stop serve
// with a usage error naming the flag, never repeating the password.
func TestServeRefusesBadMailFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--smtp-url", "smtp://u:topsecretpw@mail.example.com"}, "--smtp-from"},
		{[]string{"--smtp-url", "smtp://u:topsecretpw@mail.example.com", "--smtp-from", "a@b.c\r\nBcc: x@y.z"}, "--smtp-from"},
		{[]string{"--smtp-url", "http://u:topsecretpw@mail.example.com", "--smtp-from", "a@example.com"}, "--smtp-url"},
		{[]string{"--smtp-from", "a@example.com"}, "--smtp-from needs --smtp-url"},
		{[]string{"--public-url", "agentapi.example.com"}, "--public-url"},
		{[]string{"--public-url", "ftp://agentapi.example.com"}, "--public-url"},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "x.db")}, c.args...)
		code := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), c.want) || strings.Contains(errb.String(), "topsecretpw") {
			t.Errorf("serve %v: exit %d, stderr %q", c.args, code, errb.String())
		}
	}
}

// TestServeHelpHidesTheSMTPPassword: serve -h prints the flags' defaults,
// and AGENTAPI_SMTP_URL (with its password) is not one of them.
func TestServeHelpHidesTheSMTPPassword(t *testing.T) {
	var out, errb bytes.Buffer
	env := func(k string) string {
		if k == "AGENTAPI_SMTP_URL" {
			return "smtp://u:topsecretpw@mail.example.com"
		}
		return ""
	}
	run(context.Background(), []string{"serve", "-h"}, env, strings.NewReader(""), &out, &errb)
	if all := out.String() + errb.String(); !strings.Contains(all, "--smtp-url") || strings.Contains(all, "topsecretpw") {
		t.Fatalf("serve -h:\n%s", all)
	}
}

// TestTwoInstancesMailOnce, with the built binary: two serve processes on
// one PostgreSQL, one given --smtp-url and the other AGENTAPI_SMTP_URL; a leak report to one is mailed
// once to each of the Owner and the Admin, not once per instance.
func TestTwoInstancesMailOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two servers")
	}
	db := storetest.PostgresURL(t)
	srv := mailtest.Start(t, mailtest.Options{NoStartTLS: true})
	gh := secretscantest.NewSigner(t, "gh-1")
	keysFile := filepath.Join(t.TempDir(), "github-keys.json")
	secretscantest.WriteKeys(t, keysFile, 0, gh)
	flags := []string{"--db", db, "--secret-scanning-keys", keysFile, "--smtp-from", "notices@agentapi.example.com"}
	a := startServer(t, nil, append(flags, "--smtp-url", "smtp://127.0.0.1:"+srv.Port())...)
	b := startServer(t, []string{"AGENTAPI_SMTP_URL=smtp://127.0.0.1:" + srv.Port()}, flags...) // the variable, not the flag
	if !strings.Contains(b.stderr.String(), `"msg":"mail: notice emails on","smtp":"smtp://127.0.0.1:`) {
		t.Fatalf("the instance given AGENTAPI_SMTP_URL does not send mail:\n%s", b.stderr.String())
	}

	acct := mustCLI(t, db, "", "account", "create", "--name", "Twice")
	for _, u := range [][2]string{{"owner2@example.com", "owner"}, {"admin2@example.com", "admin"}} {
		mustCLI(t, db, "long enough password\n", "user", "create", "--account", acct, "--email", u[0], "--role", u[1])
	}
	var k struct{ Credential string }
	if err := json.Unmarshal([]byte(mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "owner2@example.com",
		"--name", "pushed", "--preset", "full-access", "--json")), &k); err != nil {
		t.Fatal(err)
	}
	report := secretscantest.Report(t, secretscan.Entry{Token: k.Credential, Type: "agentapi_api_key",
		URL: "https://github.com/octo/leak/blob/main/config.py", Source: "content"})
	if code, body := postReport(t, a.base, report, gh); code != 200 {
		t.Fatalf("report: %d %s", code, body)
	}
	srv.Wait(2, 20*time.Second)
	time.Sleep(6 * time.Second) // past the other instance's 5 s poll
	var to []string
	for _, m := range srv.Messages() {
		to = append(to, m.To...)
	}
	slices.Sort(to)
	if !slices.Equal(to, []string{"admin2@example.com", "owner2@example.com"}) {
		t.Fatalf("mailed %v, want the Owner and the Admin once each", to)
	}
}
