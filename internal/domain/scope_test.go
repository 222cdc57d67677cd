package domain_test

import (
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
)

// Every scope carries a one-line description, and exactly those that grant
// nothing callable (everything but aiagents:* and webhooks:manage) are
// reserved.
func TestScopeDescriptions(t *testing.T) {
	for _, s := range domain.Scopes {
		d := s.Description()
		if d == "" || strings.Contains(d, "\n") {
			t.Errorf("%s: description %q", s, d)
		}
		if want := !strings.HasPrefix(string(s), "aiagents:") && s != domain.ScopeWebhooksManage; s.Reserved() != want {
			t.Errorf("%s: reserved %v, want %v", s, s.Reserved(), want)
		}
	}
	if domain.Scope("nope:x").Description() != "" || domain.Scope("nope:x").Reserved() {
		t.Error("a scope outside the vocabulary has a description")
	}
}
