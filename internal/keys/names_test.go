package keys_test

import (
	"context"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
)

// TestKeyNameRule: a key name follows the one name rule (domain.CheckName):
// it needs a visible character.
func TestKeyNameRule(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	owner := w.users["owner@acme.test"]
	base := keys.CreateParams{AccountID: w.account.ID, Scopes: []domain.Scope{domain.ScopeAgentsRead}}
	for _, name := range []string{"\u202e", " \u2066\u2069 ", "\u200b\u200d\ufeff", "\u0301", "\u3164", "\u202e\u200b"} {
		p := base
		p.Name = name
		if _, err := w.svc.Create(ctx, keys.Actor{User: &owner}, p); !domain.IsCode(err, domain.CodeInvalidValue) {
			t.Errorf("name %+q: %v, want invalid_value", name, err)
		}
	}
	p := base
	p.Name = " \u202eCI key\u202c "
	c, err := w.svc.Create(ctx, keys.Actor{User: &owner}, p)
	if err != nil {
		t.Fatalf("visible name with a bidi control: %v", err)
	}
	if c.Key.Name != "\u202eCI key\u202c" {
		t.Fatalf("stored name %+q, want it trimmed", c.Key.Name)
	}
}
