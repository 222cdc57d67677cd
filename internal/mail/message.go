package mail

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"strings"
	"time"
	"unicode"
)

// Message is one email to one recipient.
type Message struct {
	From, To string // addresses (ParseAddress checked)
	Subject  string // any text: control characters are dropped, non-ASCII encoded
	Text     string // the text/plain part
	HTML     string // the text/html part, already escaped (html/template)
	Date     time.Time
	// MessageID is the Message-ID without its angle brackets; empty: a
	// random one at From's domain.
	MessageID string
}

// ParseAddress checks a bare address (user@example.com) as --smtp-from
// and users' emails must be: one address, no display name, nothing a
// header could be split on.
func ParseAddress(s string) (string, error) {
	if strings.ContainsAny(s, "\r\n<>\" ,;") {
		return "", errors.New("must be one bare address such as notices@example.com")
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || !strings.Contains(s, "@") {
		return "", errors.New("must be one bare address such as notices@example.com")
	}
	return a.Address, nil
}

// Build is the message as SMTP's DATA carries it: headers, then a
// multipart/alternative body of the text and the HTML, each UTF-8 in
// quoted-printable. Header values come only from checked addresses, the
// encoded subject and values made here, so no input adds a header.
func (m Message) Build() ([]byte, error) {
	from, err := ParseAddress(m.From)
	if err != nil {
		return nil, fmt.Errorf("from: %w", err)
	}
	to, err := ParseAddress(m.To)
	if err != nil {
		return nil, fmt.Errorf("to: %w", err)
	}
	id := m.MessageID
	if id == "" {
		id = newMessageID(from)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, p := range []struct{ typ, text string }{{"text/plain", m.Text}, {"text/html", m.HTML}} {
		if err := writePart(mw, p.typ, p.text); err != nil {
			return nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, fmt.Errorf("build message: %w", err)
	}
	var b bytes.Buffer
	header := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	header("From", from)
	header("To", to)
	header("Subject", EncodeSubject(m.Subject))
	header("Date", m.Date.UTC().Format(time.RFC1123Z))
	header("Message-ID", "<"+id+">")
	header("MIME-Version", "1.0")
	header("Content-Type", mime.FormatMediaType("multipart/alternative", map[string]string{"boundary": mw.Boundary()}))
	b.WriteString("\r\n")
	b.Write(body.Bytes())
	return b.Bytes(), nil
}

func writePart(mw *multipart.Writer, typ, text string) error {
	h := textproto.MIMEHeader{}
	h.Set("Content-Type", typ+"; charset=utf-8")
	h.Set("Content-Transfer-Encoding", "quoted-printable")
	pw, err := mw.CreatePart(h)
	if err != nil {
		return fmt.Errorf("build message: %w", err)
	}
	qw := quotedprintable.NewWriter(pw)
	if _, err := qw.Write([]byte(strings.ReplaceAll(text, "\r\n", "\n"))); err != nil {
		return fmt.Errorf("build message: %w", err)
	}
	return qw.Close()
}

// EncodeSubject is s as a Subject header's value: control characters
// (a CR or LF that would start a header of its own) become spaces, and
// anything beyond ASCII is encoded (RFC 2047, Q).
func EncodeSubject(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return mime.QEncoding.Encode("utf-8", s)
}

func newMessageID(from string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	domain := from[strings.LastIndexByte(from, '@')+1:]
	return hex.EncodeToString(b[:]) + "@" + domain
}
