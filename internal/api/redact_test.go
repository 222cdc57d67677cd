package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/credential"
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
