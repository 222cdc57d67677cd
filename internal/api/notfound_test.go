package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
)

// TestNotFoundEchoesNoCredential: a credential pasted as the agent id of
// any agent route is answered 404 with its public prefix at most, never
// the credential whole, for a key restricted to agents (agentRoute's 404)
// and one that is not (the handlers' own).
func TestNotFoundEchoesNoCredential(t *testing.T) {
	f := newFixture(t, "sqlite")
	open := f.key(allAgentScopes...)
	mine := f.createAgent(open, "Mine")
	restricted := f.keyIn(f.account, f.owner, func(p *keys.CreateParams) { p.AgentIDs = []string{mine} }, allAgentScopes...).Credential
	pasted := f.key(domain.ScopeAgentsRead) // the credential pasted into the path, a live one
	secret := pasted[len(pasted)-credential.SecretLen:]
	public := credential.Redact(pasted)
	for _, id := range []string{
		pasted,
		"%61" + pasted[1:], // escaped in the path: the route sees it decoded
		"agt_" + pasted,
	} {
		for _, tc := range []struct{ method, path, body string }{
			{"GET", "/v1/ai-agents/" + id, ""},
			{"PATCH", "/v1/ai-agents/" + id, `{"name":"x"}`},
			{"PUT", "/v1/ai-agents/" + id + "/enabled", `{"enabled":false}`},
			{"GET", "/v1/ai-agents/" + id + "/stats", ""},
			{"POST", "/v1/ai-agents/" + id + "/questions", `{"question":"Hello?"}`},
		} {
			for _, key := range []string{open, restricted} {
				r := f.send(tc.method, tc.path, key, tc.body)
				r.wantError(t, http.StatusNotFound, domain.CodeNotFound)
				body := r.Body.String()
				if strings.Contains(body, secret) || strings.Contains(body, secret[:8]) {
					t.Errorf("%s %.40s…: the credential's secret is echoed: %s", tc.method, tc.path, body)
				}
				if !strings.Contains(r.message(), public) {
					t.Errorf("%s %.40s…: message %q does not show the public part %q", tc.method, tc.path, r.message(), public)
				}
			}
		}
	}
}
