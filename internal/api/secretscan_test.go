package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
	"github.com/agentapi/agentapi/internal/secretscan"
	"github.com/agentapi/agentapi/internal/secretscan/secretscantest"
)

const reportPath = "/secret-scanning/github"

// withScanKeys turns the endpoint on with a keys file listing signers.
func withScanKeys(t *testing.T, path string, signers ...secretscantest.Signer) func(*Config) {
	t.Helper()
	secretscantest.WriteKeys(t, path, -time.Hour, signers...)
	ks, err := secretscan.LoadKeys(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *Config) { c.SecretScanningKeys = ks }
}

// report posts body with headers and returns the answer, an array on 200.
func (f *fixture) report(body []byte, headers ...string) (*httptest.ResponseRecorder, []secretscan.Answer) {
	f.t.Helper()
	hr := httptest.NewRequest(http.MethodPost, "http://api.test"+reportPath, strings.NewReader(string(body)))
	hr.Header.Set("Content-Type", "application/json")
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		hr.Header.Set(name, strings.TrimSpace(value))
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, hr)
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		f.t.Fatalf("Content-Type %q, body %q", ct, rec.Body.String())
	}
	var out []secretscan.Answer
	if rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			f.t.Fatalf("200 whose body is not an array of answers: %q", rec.Body.String())
		}
	}
	return rec, out
}

// wantReportError asserts the error envelope of a refused report.
func wantReportError(t *testing.T, rec *httptest.ResponseRecorder, status int, code domain.Code) {
	t.Helper()
	r := &response{ResponseRecorder: rec}
	if err := json.Unmarshal(rec.Body.Bytes(), &r.body); err != nil {
		t.Fatalf("status %d, body not a JSON object: %q", rec.Code, rec.Body.String())
	}
	r.wantError(t, status, code)
}

func entry(token string) secretscan.Entry {
	return secretscan.Entry{Token: token, Type: "agentapi_api_key", URL: "https://github.com/octo/leak/blob/main/.env", Source: "content"}
}

// TestLeakReportRevokesOnEveryInstance: a signed report naming an active
// key revokes it, and the very next request with that key is refused by
// this instance and by another one sharing the database; the answer labels
// each token; a replay changes nothing and answers the same; a revoked
// key is still a true positive; tokens not ours are false positives.
func TestLeakReportRevokesOnEveryInstance(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		served, other := sharedStores(t, engine)
		gh := secretscantest.NewSigner(t, "gh-current")
		f := newFixtureOn(t, served, withScanKeys(t, filepath.Join(t.TempDir(), "keys.json"), gh))
		g := newFixtureOn(t, other) // another instance; the endpoint off there
		ctx := context.Background()

		leaked := f.keyIn(f.account, f.owner, nil, allAgentScopes...)
		bystander := f.keyIn(f.account, f.owner, nil, allAgentScopes...)
		gone := f.keyIn(f.account, f.owner, nil, allAgentScopes...)
		if err := f.keys.Revoke(ctx, keys.Actor{User: &f.owner}, f.account.ID, gone.Key.ID); err != nil {
			t.Fatal(err)
		}
		for range 3 { // both instances hold the keys in memory
			f.get("/v1/me", leaked.Credential).wantStatus(t, 200)
			g.get("/v1/me", leaked.Credential).wantStatus(t, 200)
		}
		// Another secret under the bystander's prefix, checksum fixed.
		forged := secretscantest.Forged(bystander.Credential)
		unknown, err := credential.Generate(domain.EnvTest)
		if err != nil {
			t.Fatal(err)
		}
		tokens := []string{leaked.Credential, "ghp_notours", forged, unknown.Text, gone.Credential, leaked.Credential}
		want := []secretscan.Label{secretscan.TruePositive, secretscan.FalsePositive, secretscan.FalsePositive,
			secretscan.FalsePositive, secretscan.TruePositive, secretscan.TruePositive}
		var es []secretscan.Entry
		for _, tok := range tokens {
			es = append(es, entry(tok))
		}
		body := secretscantest.Report(t, es...)
		check := func(what string) {
			t.Helper()
			leakReportCheckAnswers(t, f, gh, body, tokens, want, leaked.Credential, what)
		}
		check("report")

		g.get("/v1/me", leaked.Credential).wantError(t, 401, domain.CodeInvalidCredentials)
		f.get("/v1/me", leaked.Credential).wantError(t, 401, domain.CodeInvalidCredentials)
		f.get("/v1/me", bystander.Credential).wantStatus(t, 200)
		g.get("/v1/me", bystander.Credential).wantStatus(t, 200)

		evs := leakReportWantRevocationRecorded(t, f, leaked)

		check("replay")
		leakReportWantNoMoreEvents(t, f, len(evs), leaked.Key.ID, gone.Key.ID, bystander.Key.ID)
		// Reports are not for the instance without the keys file.
		rec, _ := g.report(body, gh.Headers(t, body)...)
		wantReportError(t, rec, 404, domain.CodeNotFound)
	})
}

// leakReportCheckAnswers posts the signed report and checks that it
// answers one label per token, in order, without repeating the secret.
func leakReportCheckAnswers(t *testing.T, f *fixture, gh secretscantest.Signer, body []byte, tokens []string, want []secretscan.Label, secret, what string) {
	t.Helper()
	rec, answers := f.report(body, gh.Headers(t, body)...)
	if rec.Code != http.StatusOK || len(answers) != len(tokens) {
		t.Fatalf("%s: status %d, %s", what, rec.Code, rec.Body.String())
	}
	for i, a := range answers {
		if a.Label != want[i] || a.TokenHash != secretscan.TokenHash(tokens[i]) || a.TokenType != "agentapi_api_key" {
			t.Fatalf("%s: answer %d = %+v, want %s", what, i, a, want[i])
		}
	}
	if strings.Contains(rec.Body.String(), secret[22:]) {
		t.Fatalf("%s: the answer repeats a secret", what)
	}
}

// leakReportWantRevocationRecorded checks that the leaked key's revocation
// is audited and logged with its prefix, and returns its audit events.
func leakReportWantRevocationRecorded(t *testing.T, f *fixture, leaked keys.Created) []domain.AuditEvent {
	t.Helper()
	evs, err := f.st.ListKeyAuditEvents(context.Background(), f.account.ID, leaked.Key.ID)
	if err != nil || len(evs) != 2 || evs[0].Action != "revoked" || evs[0].Actor != keys.LeakActor ||
		evs[0].Detail != "reported leaked at https://github.com/octo/leak/blob/main/.env" {
		t.Fatalf("audit events %+v, %v", evs, err)
	}
	if !strings.Contains(f.logs.String(), "reported leaked") || !strings.Contains(f.logs.String(), leaked.Key.Prefix) {
		t.Fatalf("the revocation is not logged with the key's prefix:\n%s", f.logs.String())
	}
	return evs
}

// leakReportWantNoMoreEvents checks that the replay wrote no event for the
// leaked key beyond the had events it had before, and that the other keys got none.
func leakReportWantNoMoreEvents(t *testing.T, f *fixture, had int, leakedID string, others ...string) {
	t.Helper()
	ctx := context.Background()
	if evs2, _ := f.st.ListKeyAuditEvents(ctx, f.account.ID, leakedID); len(evs2) != had {
		t.Fatalf("the replay wrote %d more events", len(evs2)-had)
	}
	for _, id := range others {
		if evs, _ := f.st.ListKeyAuditEvents(ctx, f.account.ID, id); len(evs) > 2 {
			t.Fatalf("key %s got events: %+v", id, evs)
		}
	}
}

// TestLeakReportRefusals: what is not a well-signed, well-formed report
// revokes nothing and gets the JSON envelope.
func TestLeakReportRefusals(t *testing.T) {
	gh, stranger := secretscantest.NewSigner(t, "gh"), secretscantest.NewSigner(t, "stranger")
	f := newFixture(t, "sqlite", withScanKeys(t, filepath.Join(t.TempDir(), "keys.json"), gh))
	c := f.key(allAgentScopes...)
	body := secretscantest.Report(t, entry(c))
	sig := gh.Sign(t, body)
	tampered := []byte(strings.Replace(string(body), "octo", "octa", 1))
	many := make([]secretscan.Entry, secretscan.MaxEntries+1)
	for i := range many {
		many[i] = entry("ghp_x")
	}
	tooMany := secretscantest.Report(t, many...)
	big := []byte("[" + strings.Repeat(" ", MaxBodyBytes) + "]")
	for _, tc := range []struct {
		name    string
		body    []byte
		headers []string
		status  int
		code    domain.Code
	}{
		{"unsigned", body, nil, 401, domain.CodeInvalidCredentials},
		{"no key id", body, []string{secretscan.HeaderSignature + ": " + sig}, 401, domain.CodeInvalidCredentials},
		{"tampered body", tampered, []string{secretscan.HeaderKeyID + ": gh", secretscan.HeaderSignature + ": " + sig}, 401, domain.CodeInvalidCredentials},
		{"unknown key id", body, stranger.Headers(t, body), 401, domain.CodeInvalidCredentials},
		{"known id, stranger's signature", body, []string{secretscan.HeaderKeyID + ": gh", secretscan.HeaderSignature + ": " + stranger.Sign(t, body)}, 401, domain.CodeInvalidCredentials},
		{"signature not base64", body, []string{secretscan.HeaderKeyID + ": gh", secretscan.HeaderSignature + ": %%%"}, 401, domain.CodeInvalidCredentials},
		{"compressed", body, append(gh.Headers(t, body), "Content-Encoding: gzip"), 415, domain.CodeUnsupportedType},
		{"signed, not JSON", []byte(`[{"token":`), gh.Headers(t, []byte(`[{"token":`)), 400, domain.CodeInvalidJSON},
		{"signed, an object", []byte(`{"token":"x"}`), gh.Headers(t, []byte(`{"token":"x"}`)), 400, domain.CodeDatatypeMismatch},
		{"signed, too many entries", tooMany, gh.Headers(t, tooMany), 400, domain.CodeInvalidValue},
		{"over 1 MiB", big, gh.Headers(t, big), 413, domain.CodeFileTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, _ := f.report(tc.body, tc.headers...)
			wantReportError(t, rec, tc.status, tc.code)
		})
	}
	f.get("/v1/me", c).wantStatus(t, 200) // nothing above revoked it

	// Only POST: anything else is an unknown path.
	f.do(req{method: "GET", path: reportPath}).wantError(t, 404, domain.CodeNotFound)
	f.do(req{method: "PUT", path: reportPath, body: `[]`}).wantError(t, 404, domain.CodeNotFound)
	// Off without keys.
	off := newFixture(t, "sqlite")
	rec, _ := off.report(body, gh.Headers(t, body)...)
	wantReportError(t, rec, 404, domain.CodeNotFound)
}

// TestLeakReportsCountPerAddress: reports need no key, so they count
// against the address's limit of requests without one.
func TestLeakReportsCountPerAddress(t *testing.T) {
	gh := secretscantest.NewSigner(t, "gh")
	f := newFixture(t, "sqlite", withScanKeys(t, filepath.Join(t.TempDir(), "keys.json"), gh),
		func(c *Config) { c.UnauthRateLimit = 3 })
	body := secretscantest.Report(t)
	for i := range 3 {
		rec, answers := f.report(body, gh.Headers(t, body)...)
		if rec.Code != 200 || len(answers) != 0 || rec.Header().Get("X-RateLimit-Limit") != "3" {
			t.Fatalf("report %d: %d %s %v", i, rec.Code, rec.Body.String(), rec.Header())
		}
	}
	rec, _ := f.report(body, gh.Headers(t, body)...)
	wantReportError(t, rec, 429, domain.CodeRateLimitExceeded)
	rec, _ = f.report(body) // unsigned too: the limit comes first
	wantReportError(t, rec, 429, domain.CodeRateLimitExceeded)
}

// TestLeakReportKeyRotation: with two keys listed both verify; once the
// old one is no longer listed, its reports are refused, without a restart.
func TestLeakReportKeyRotation(t *testing.T) {
	old, cur := secretscantest.NewSigner(t, "old"), secretscantest.NewSigner(t, "new")
	path := filepath.Join(t.TempDir(), "keys.json")
	f := newFixture(t, "sqlite", withScanKeys(t, path, cur, old))
	body := secretscantest.Report(t, entry("ghp_x"))
	for _, s := range []secretscantest.Signer{old, cur} {
		if rec, _ := f.report(body, s.Headers(t, body)...); rec.Code != 200 {
			t.Fatalf("key %s: %d %s", s.ID, rec.Code, rec.Body.String())
		}
	}
	secretscantest.WriteKeys(t, path, -time.Minute, cur)
	rec, _ := f.report(body, old.Headers(t, body)...)
	wantReportError(t, rec, 401, domain.CodeInvalidCredentials)
	if rec, _ := f.report(body, cur.Headers(t, body)...); rec.Code != 200 {
		t.Fatalf("current key after rotation: %d %s", rec.Code, rec.Body.String())
	}
}
