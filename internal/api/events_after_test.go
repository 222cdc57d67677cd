package api

import (
	"net/http"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
)

// TestEventsAfter: a consumer that saved the id of the last event it
// processed asks with after= and gets exactly the events committed since,
// in order, past the last page (whose next is null); an id that is not an
// event of the account, or after beside next, is 400 naming after.
func TestEventsAfter(t *testing.T) {
	f := newFixture(t, "sqlite")
	key := f.key(domain.ScopeAgentsWrite, domain.ScopeWebhooksManage)
	f.createAgent(key, "one")
	first := f.get("/v1/events?type=ai_agent.*", key)
	first.wantStatus(t, http.StatusOK)
	list := first.body["data"].([]any)
	if len(list) != 1 || first.body["meta"].(map[string]any)["next"] != nil {
		t.Fatalf("first page: %v", first.body)
	}
	last := list[0].(map[string]any)["id"].(string)
	if r := f.get("/v1/events?type=ai_agent.*&after="+last, key); len(r.body["data"].([]any)) != 0 {
		t.Fatalf("after the newest event: %v, want none", r.body["data"])
	}
	f.createAgent(key, "two")
	f.createAgent(key, "three")
	r := f.get("/v1/events?type=ai_agent.*&after="+last, key)
	r.wantStatus(t, http.StatusOK)
	got := r.body["data"].([]any)
	if len(got) != 2 {
		t.Fatalf("after %s: %d events, want the 2 made since", last, len(got))
	}
	for i, name := range []string{"two", "three"} {
		data := got[i].(map[string]any)["data"].(map[string]any)
		if data["name"] != name {
			t.Errorf("event %d is about %v, want %s (commit order)", i, data["name"], name)
		}
	}
	other, owner := f.newAccount("Other")
	otherKey := f.keyIn(other, owner, nil, domain.ScopeWebhooksManage).Credential
	f.get("/v1/events?after="+last, otherKey).wantError(t, http.StatusBadRequest, domain.CodeInvalidValue, "after:invalid_value")
	f.get("/v1/events?after=evt_nope", key).wantError(t, http.StatusBadRequest, domain.CodeInvalidValue, "after:invalid_value")
}
