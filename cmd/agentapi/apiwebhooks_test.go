package main

import (
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
)

// TestAPIWebhookCommands: `agentapi api events` and `agentapi api
// webhooks` against the real API, printing its objects one a line.
func TestAPIWebhookCommands(t *testing.T) {
	s := newAPIService(t)
	key := s.key(nil, domain.ScopeAgentsWrite, domain.ScopeWebhooksManage).Credential

	ep := mustAPI(t, key, s.url, "webhooks", "create", "https://hooks.example.com/in", "--events", "ai_agent.*,api_key.revoked", "--description", "listener")[0]
	id, _ := ep["id"].(string)
	if !strings.HasPrefix(id, "we_") || !strings.HasPrefix(ep["secret"].(string), "whsec_") || ep["status"] != "enabled" ||
		ep["disabled_reason"] != nil || len(ep["enabled_events"].([]any)) != 2 || !serverTime(ep["created_at"]) || len(ep) != 9 {
		t.Fatalf("webhooks create: %v", ep)
	}
	if list := mustAPI(t, key, s.url, "webhooks", "list"); len(list) != 1 || list[0]["id"] != id || list[0]["secret"] != nil {
		t.Fatalf("webhooks list: %v", list)
	}
	if got := mustAPI(t, key, s.url, "webhooks", "get", id)[0]; got["id"] != id || len(got) != 8 {
		t.Fatalf("webhooks get: %v", got)
	}
	for _, n := range []string{"a", "b", "c"} {
		mustAPI(t, key, s.url, "agents", "create", "--name", n)
	}
	apiEventPages(t, s, key)
	test := mustAPI(t, key, s.url, "webhooks", "test", id)[0]
	if test["type"] != "webhook.test" || !strings.HasPrefix(test["id"].(string), "evt_") {
		t.Fatalf("webhooks test: %v", test)
	}
	rot := mustAPI(t, key, s.url, "webhooks", "rotate-secret", id, "--overlap", "1h")[0]
	if rot["secret"] == ep["secret"] || !serverTime(rot["old_secret_expires_at"]) {
		t.Fatalf("webhooks rotate-secret: %v", rot)
	}
	if log := mustAPI(t, key, s.url, "webhooks", "deliveries", id, "--status", "failed"); len(log) != 0 {
		t.Fatalf("webhooks deliveries (no worker runs): %v", log)
	}
	if out := mustAPI(t, key, s.url, "webhooks", "delete", id); len(out) != 0 {
		t.Fatalf("webhooks delete printed %v", out)
	}
	out, errs, code := apiCLI(t, key, s.url, "", "webhooks", "get", id)
	if code != 1 || out != "" || !strings.HasPrefix(errs, "agentapi: not_found: ") {
		t.Fatalf("get after delete: exit %d, %q, %q", code, out, errs)
	}
	for _, c := range [][]string{
		{"webhooks", "create", "https://x.example.com"},
		{"webhooks", "rotate-secret", id, "--overlap", "-1h"},
		{"events", "list", "--since", "yesterday"},
		{"events", "get"},
	} {
		if _, errs, code := apiCLI(t, key, s.url, "", c...); code != 2 || !strings.HasPrefix(errs, "agentapi: ") {
			t.Errorf("%v: exit %d, %q", c, code, errs)
		}
	}
}

// apiEventPages: events list prints a page and names the next on stderr;
// --all follows every page; --type filters; events get reads one.
func apiEventPages(t *testing.T, s *apiService, key string) {
	t.Helper()
	out, errs, code := apiCLI(t, key, s.url, "", "events", "list", "--limit", "2")
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.HasPrefix(errs, "agentapi: more events: --next ") {
		t.Fatalf("events list --limit 2: exit %d, %q, %q", code, out, errs)
	}
	all := mustAPI(t, key, s.url, "events", "list", "--limit", "2", "--all", "--type", "ai_agent.created")
	if len(all) != 3 || all[0]["type"] != "ai_agent.created" || all[0]["request_id"] == nil || len(all[0]) != 6 {
		t.Fatalf("events list --all: %v", all)
	}
	// The key's own creation is the one api_key event.
	if keys := mustAPI(t, key, s.url, "events", "list", "--type", "api_key.*", "--since", "2020-01-01T00:00:00Z"); len(keys) != 1 || keys[0]["type"] != "api_key.created" {
		t.Fatalf("events list --type api_key.*: %v", keys)
	}
	if none := mustAPI(t, key, s.url, "events", "list", "--since", "2999-01-01T00:00:00Z"); len(none) != 0 {
		t.Fatalf("events list --since the future: %v", none)
	}
	one := mustAPI(t, key, s.url, "events", "get", all[1]["id"].(string))[0]
	if one["id"] != all[1]["id"] || one["data"].(map[string]any)["name"] != "b" {
		t.Fatalf("events get: %v", one)
	}
}
