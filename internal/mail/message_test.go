package mail_test

import (
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	netmail "net/mail"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/mail"
	"github.com/agentapi/agentapi/internal/wire"
)

// parsed is a built message read back as a mail client reads it.
type parsed struct {
	header     netmail.Header
	text, html string
	subject    string
}

func parse(t *testing.T, raw []byte) parsed {
	t.Helper()
	m, err := netmail.ReadMessage(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatalf("read message: %v\n%s", err, raw)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	if err != nil {
		t.Fatalf("subject: %v", err)
	}
	mt, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("content type %q: %v", m.Header.Get("Content-Type"), err)
	}
	p := parsed{header: m.Header, subject: subject}
	mr := multipart.NewReader(m.Body, params["boundary"])
	for {
		part, err := mr.NextPart() // decodes quoted-printable
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("part: %v", err)
		}
		b, _ := io.ReadAll(part)
		switch ct := part.Header.Get("Content-Type"); ct {
		case "text/plain; charset=utf-8":
			p.text = string(b)
		case "text/html; charset=utf-8":
			p.html = string(b)
		default:
			t.Fatalf("unexpected part %q", ct)
		}
	}
	if p.text == "" || p.html == "" {
		t.Fatalf("want a text and an HTML part: %+v", p)
	}
	return p
}

func keyEvent(t *testing.T, typ domain.EventType, name string, extra string) domain.Event {
	t.Helper()
	exp := "2026-12-09T03:00:00Z"
	data, err := json.Marshal(wire.Me{Key: wire.Key{ID: "key_01JX", Name: name, Prefix: "aa_live_Ab12Cd", ExpiresAt: &exp}})
	if err != nil {
		t.Fatal(err)
	}
	ev := domain.Event{ID: "evt_1", AccountID: "acct_1", Type: typ, Data: data, CreatedAt: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)}
	if extra != "" {
		ev.Extra = json.RawMessage(extra)
	}
	return ev
}

func build(t *testing.T, n mail.Notice, to string) parsed {
	t.Helper()
	raw, err := mail.Message{From: "notices@example.com", To: to, Subject: n.Subject, Text: n.Text, HTML: n.HTML,
		Date: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC), MessageID: "evt_1.usr_1@example.com"}.Build()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	if strings.Contains(strings.ReplaceAll(string(raw), "\r\n", ""), "\n") {
		t.Fatal("a bare LF in the message: SMTP lines end in CRLF")
	}
	return parse(t, raw)
}

// TestNoticeOfEachKind: the four mailed kinds each give a message with both
// parts, the key's name and prefix (or the endpoint), what to do and the
// console link under --public-url; the 1-day reminder and other types give
// none.
func TestNoticeOfEachKind(t *testing.T) {
	reason := "gone"
	endpoint, _ := json.Marshal(wire.WebhookEndpoint{ID: "we_1", URL: "https://hooks.example.com/in", DisabledReason: &reason})
	cases := []struct {
		name    string
		ev      domain.Event
		subject string
		want    []string
		link    string
	}{
		{"leaked", keyEvent(t, domain.EventKeyLeaked, "Billing sync", `{"source":{"type":"github_secret_scanning","url":"https://github.com/o/r/blob/x/.env"}}`),
			"API key “Billing sync” was found in public and revoked", []string{"aa_live_Ab12Cd", "revoked", "https://github.com/o/r/blob/x/.env", "Create a new key"},
			"https://console.example.com/console/developers/keys/key_01JX"},
		{"anomaly", keyEvent(t, domain.EventKeyAnomaly, "Billing sync", `{"reason":"new_network","details":{}}`),
			"Unusual use of API key “Billing sync”", []string{"aa_live_Ab12Cd", "a network (an IPv4 /24 or IPv6 /48)", "revoke the key"},
			"https://console.example.com/console/developers/keys/key_01JX"},
		{"expiring", keyEvent(t, domain.EventKeyExpiring, "Billing sync", `{"details":{"expires_in":"7d"}}`),
			"API key “Billing sync” expires in 7 days", []string{"aa_live_Ab12Cd", "9 December 2026 at 03:00 UTC", "rotate this one"},
			"https://console.example.com/console/developers/keys/key_01JX"},
		{"endpoint", domain.Event{ID: "evt_2", Type: domain.EventWebhookEndpointDisabled, Data: endpoint},
			"Webhook endpoint disabled: https://hooks.example.com/in", []string{"410 Gone", "we_1", "enable the endpoint"},
			"https://console.example.com/console/developers/webhooks/we_1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, ok := mail.Compose(c.ev, "", "https://console.example.com/")
			if !ok {
				t.Fatal("not composed")
			}
			wantNotice(t, build(t, n, "owner@example.com"), c.subject, c.link, c.want)
		})
	}
	for _, ev := range []domain.Event{
		keyEvent(t, domain.EventKeyExpiring, "k", `{"details":{"expires_in":"1d"}}`),
		keyEvent(t, domain.EventKeyExpired, "k", ""),
		keyEvent(t, domain.EventKeyRevoked, "k", ""),
	} {
		if _, ok := mail.Compose(ev, "", ""); ok {
			t.Errorf("%s %s was composed: only the 7-day reminder is mailed", ev.Type, ev.Extra)
		}
	}
}

// wantNotice checks a built notice's subject, that both parts say each of
// want and the link, and that the HTML links to it.
func wantNotice(t *testing.T, p parsed, subject, link string, want []string) {
	t.Helper()
	if p.subject != subject {
		t.Errorf("subject %q, want %q", p.subject, subject)
	}
	for _, w := range append(want, link) {
		if !strings.Contains(p.text, w) {
			t.Errorf("text lacks %q:\n%s", w, p.text)
		}
		if !strings.Contains(p.html, w) {
			t.Errorf("HTML lacks %q:\n%s", w, p.html)
		}
	}
	if !strings.Contains(p.html, `href="`+link+`"`) {
		t.Errorf("HTML has no link to %s", link)
	}
}

// TestNoticeWithoutPublicURL says where in the console instead of a link.
func TestNoticeWithoutPublicURL(t *testing.T) {
	n, ok := mail.Compose(keyEvent(t, domain.EventKeyLeaked, "Billing", `{"source":{}}`), "Acme", "")
	if !ok {
		t.Fatal("not composed")
	}
	p := build(t, n, "a@example.com")
	if strings.Contains(p.text, "http") || strings.Contains(p.html, "href") {
		t.Errorf("a link without --public-url:\n%s\n%s", p.text, p.html)
	}
	if !strings.Contains(p.text, "Settings → Developers → API keys → Billing") || !strings.Contains(p.text, "Account: Acme") {
		t.Errorf("text does not say where: %s", p.text)
	}
}

// TestNoticeEscapesAndHeadersHold: a key name with markup, CRLF and
// header text neither adds a header nor markup, and the subject survives
// encoded; the message's headers are the six expected.
func TestNoticeEscapesAndHeadersHold(t *testing.T) {
	name := "<script>alert(1)</script>\r\nBcc: victim@example.com\r\n\r\nÉté"
	n, ok := mail.Compose(keyEvent(t, domain.EventKeyLeaked, name, `{"source":{"url":"javascript:alert(1)"}}`), "<b>Acme</b>", "https://c.example.com")
	if !ok {
		t.Fatal("not composed")
	}
	p := build(t, n, "owner@example.com")
	if p.header.Get("Bcc") != "" {
		t.Fatal("a key name added a Bcc header")
	}
	for _, h := range []string{"From", "To", "Subject", "Date", "Message-Id", "Mime-Version", "Content-Type"} {
		if p.header.Get(h) == "" {
			t.Errorf("no %s header", h)
		}
	}
	if len(p.header) != 7 {
		t.Errorf("headers %v, want exactly seven", p.header)
	}
	if p.header.Get("Message-Id") != "<evt_1.usr_1@example.com>" {
		t.Errorf("Message-ID %q", p.header.Get("Message-Id"))
	}
	if !strings.Contains(p.subject, "Été") || strings.ContainsAny(p.subject, "\r\n") {
		t.Errorf("subject %q", p.subject)
	}
	if strings.Contains(p.html, "<script>") || !strings.Contains(p.html, "&lt;script&gt;") || !strings.Contains(p.html, "&lt;b&gt;Acme") {
		t.Errorf("HTML not escaped:\n%s", p.html)
	}
	if strings.Contains(p.html, `href="javascript`) {
		t.Errorf("a source URL became a link:\n%s", p.html)
	}
}

// TestMessageRefusesBadAddresses: an address that could split a header is
// refused, as --smtp-from and as a recipient.
func TestMessageRefusesBadAddresses(t *testing.T) {
	for _, a := range []string{"a@example.com\r\nBcc: x@example.com", "A <a@example.com>", "a@example.com, b@example.com", "nobody", ""} {
		if _, err := mail.ParseAddress(a); err == nil {
			t.Errorf("ParseAddress(%q) accepted", a)
		}
		if _, err := (mail.Message{From: "n@example.com", To: a, Date: time.Now()}).Build(); err == nil {
			t.Errorf("Build to %q accepted", a)
		}
	}
	if got, err := mail.ParseAddress("notices@example.com"); err != nil || got != "notices@example.com" {
		t.Errorf("ParseAddress: %q, %v", got, err)
	}
}

// TestNoticeHoldsNoSecret: the key's data as an event carries it has no
// secret; the notice says only what GET /me shows (name, prefix, id).
func TestNoticeHoldsNoSecret(t *testing.T) {
	ev := keyEvent(t, domain.EventKeyLeaked, "k", `{"source":{}}`)
	var m map[string]any
	if err := json.Unmarshal(ev.Data, &m); err != nil {
		t.Fatal(err)
	}
	m["secret"] = "aa_live_Ab12Cd_SECRETSECRETSECRET"
	ev.Data, _ = json.Marshal(m)
	n, _ := mail.Compose(ev, "", "")
	if strings.Contains(n.Text+n.HTML+n.Subject, "SECRET") {
		t.Fatal("a field beyond name, prefix and id reached the mail")
	}
}
