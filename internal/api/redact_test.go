package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/usage"
)

// TestCredentialVariantsRedacted: a credential in any case, anywhere in
// the method, path or query, glued to other text or not, is logged and
// echoed as its public prefix only.
func TestCredentialVariantsRedacted(t *testing.T) {
	f := newFixture(t, "sqlite")
	cred := f.key(allAgentScopes...)
	secret := strings.ToLower(cred[len(cred)-credential.SecretLen:])
	public := credential.Redact(cred)
	upper := strings.ToUpper(cred)
	for _, r := range []req{
		{method: "x" + cred, path: "/v1/me", key: cred},
		{method: "GET", path: "/v1/ai-agents/" + upper, key: cred},
		{method: "GET", path: "/v1/ai-agents/x" + cred, key: cred},
		{method: "GET", path: "/v1/nothing/" + upper, key: cred},
		{method: "GET", path: "/v1/me?" + upper + "=1", key: cred},
		{method: "GET", path: "/" + upper},
	} {
		resp := f.do(r)
		if body := strings.ToLower(resp.Body.String()); strings.Contains(body, secret) {
			t.Errorf("%s %s: the answer shows the secret: %s", r.method, r.path, resp.Body)
		}
		if r.method == "GET" && strings.HasPrefix(r.path, "/v1/") && resp.Code == http.StatusNotFound && !strings.Contains(resp.Body.String(), public) {
			t.Errorf("%s %s: the answer does not show the public prefix %s: %s", r.method, r.path, public, resp.Body)
		}
	}
	logs := f.logs.String()
	if strings.Contains(strings.ToLower(logs), secret) {
		t.Fatalf("a secret reached the log, in some case:\n%s", logs)
	}
	if !strings.Contains(logs, `"method":"x`+public+`"`) || !strings.Contains(logs, `"path":"/v1/ai-agents/`+public+`"`) {
		t.Fatalf("the log does not show the public prefix:\n%s", logs)
	}
}

// TestEncodedCredentialNotStored: a credential percent-encoded in the path
// (its "_" as %5F, every byte %XX in either case of hex, the secret alone
// encoded, or encoded twice) is shown as its public prefix in the log
// line and in the stored request log, never as text that decodes to it.
func TestEncodedCredentialNotStored(t *testing.T) {
	var rec *usage.Recorder
	f := newFixture(t, "sqlite", func(c *Config) {
		rec = usage.New(c.Store, nil, usage.Options{})
		c.Usage = rec
	})
	k := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.RateLimit = 1000 }, allAgentScopes...)
	cred := k.Credential
	head, secret := cred[:len(cred)-credential.SecretLen], cred[len(cred)-credential.SecretLen:]
	public := credential.Redact(cred)
	variants := map[string]string{
		"underscores %5F":  strings.ReplaceAll(cred, "_", "%5F"),
		"every byte %XX":   percentAll(cred, "%%%02X"),
		"every byte %xx":   percentAll(cred, "%%%02x"),
		"secret alone":     head + percentAll(secret, "%%%02X"),
		"encoded twice":    strings.ReplaceAll(cred, "_", "%255F"),
		"every byte twice": strings.ReplaceAll(percentAll(cred, "%%%02X"), "%", "%25"),
	}
	for name, v := range variants {
		f.get("/v1/ai-agents/"+v, cred).wantStatus(t, 404)
		f.get("/v1/nothing/"+v, cred).wantStatus(t, 404)
		if line := f.logs.String(); decodesTo(line, secret) {
			t.Errorf("%s: the log line shows the secret:\n%s", name, line)
		}
	}
	if err := rec.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	logs, _, err := f.st.RequestLogPage(context.Background(), store.RequestLogQuery{AccountID: f.account.ID, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 2*len(variants) {
		t.Fatalf("%d requests stored, want %d", len(logs), 2*len(variants))
	}
	for _, l := range logs {
		if decodesTo(l.Path, secret) || !strings.Contains(l.Path, public) {
			t.Errorf("stored path %q: want %s and nothing that decodes to the secret", l.Path, public)
		}
	}
}

// percentAll writes each byte of s in format (a %XX form).
func percentAll(s, format string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, format, s[i])
	}
	return b.String()
}

// decodesTo reports whether text, or text percent-decoded up to four
// times over, holds secret, in any case.
func decodesTo(text, secret string) bool {
	for range 5 {
		if strings.Contains(strings.ToLower(text), strings.ToLower(secret)) {
			return true
		}
		d, err := url.PathUnescape(text)
		if err != nil || d == text {
			return false
		}
		text = d
	}
	return false
}
