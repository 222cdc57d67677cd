package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
)

// TestRestrictedKeyLearnsNoOtherAgentID: renaming the one agent a key may
// address to the name of another agent is 409 without that agent's id
// (docs/api.md, Agent restriction); a key that may address both still gets it.
func TestRestrictedKeyLearnsNoOtherAgentID(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newFixture(t, engine)
		full := f.key(allAgentScopes...)
		a := f.createAgent(full, "Agent A")
		b := f.createAgent(full, "Agent B")
		onlyA := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.AgentIDs = []string{a} }, allAgentScopes...).Credential
		both := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.AgentIDs = []string{a, b} }, allAgentScopes...).Credential

		r := f.send("PATCH", "/v1/ai-agents/"+a, onlyA, `{"name":"agent b"}`)
		r.wantError(t, http.StatusConflict, domain.CodeDuplicateValue, "name:duplicate_value")
		if _, present := r.body["error"].(map[string]any)["existing_id"]; present || strings.Contains(r.Body.String(), b) {
			t.Fatalf("a key restricted to %s learnt %s: %s", a, b, r.Body.String())
		}
		if !strings.Contains(r.message(), "id is not shown") {
			t.Fatalf("message %q does not say the id is withheld", r.message())
		}

		for _, key := range []string{both, full} {
			r := f.send("PATCH", "/v1/ai-agents/"+a, key, `{"name":"agent b"}`)
			r.wantError(t, http.StatusConflict, domain.CodeDuplicateValue, "name:duplicate_value")
			if got := r.body["error"].(map[string]any)["existing_id"]; got != b {
				t.Fatalf("existing_id %v, want %s", got, b)
			}
		}
		// A restricted key cannot create, so cannot probe names that way.
		f.send("POST", "/v1/ai-agents", onlyA, `{"name":"Agent B"}`).wantError(t, http.StatusForbidden, domain.CodeAccessDenied)
	})
}

// TestCredentialAsMethod: a credential sent as the HTTP method (the request
// line "agk_live_… /v1/me HTTP/1.1") reaches neither the log nor the
// answer; the log keeps its public prefix (docs/observability.md, Logs).
func TestCredentialAsMethod(t *testing.T) {
	f := newFixture(t, "sqlite")
	c := f.keyIn(f.account, f.owner, nil, allAgentScopes...)
	secret := c.Credential[len(c.Credential)-38:]
	for _, auth := range []string{"", c.Credential} { // 401, then 404 (no such route)
		r := f.do(req{method: c.Credential, path: "/v1/me", key: auth})
		if auth == "" {
			r.wantError(t, http.StatusUnauthorized, domain.CodeInvalidCredentials)
		} else {
			r.wantError(t, http.StatusNotFound, domain.CodeNotFound)
		}
		if strings.Contains(r.Body.String(), secret) || strings.Contains(r.Body.String(), c.Key.Prefix) {
			t.Fatalf("the answer repeats the method: %s", r.Body.String())
		}
	}
	// A method glued to a credential, and one that only starts like one.
	for _, m := range []string{"X" + c.Credential, "agk_" + secret} {
		f.do(req{method: m, path: "/v1/me", key: c.Credential}).wantError(t, http.StatusNotFound, domain.CodeNotFound)
	}
	logs := f.logs.String()
	if strings.Contains(logs, secret) {
		t.Fatalf("the secret reached the log:\n%s", logs)
	}
	if want := `"method":"agk_live_` + c.Key.Prefix + `_…"`; !strings.Contains(logs, want) {
		t.Fatalf("the log does not show %s:\n%s", want, logs)
	}
	// A method that is no credential is logged as sent, and named in the 404.
	r := f.do(req{method: "DELETE", path: "/v1/me", key: c.Credential})
	if !strings.Contains(r.message(), "DELETE /v1/me") {
		t.Fatalf("message %q does not name the method", r.message())
	}
	if !strings.Contains(f.logs.String(), `"method":"DELETE"`) {
		t.Fatal("DELETE is not in the log")
	}
}
