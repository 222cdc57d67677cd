package requestlog

import "testing"

// RouteOf takes a route as it is, and a request line, path or address as
// the route whose pattern it fits: with its method when it has one, else
// the pattern of any method.
func TestRouteOf(t *testing.T) {
	for in, want := range map[string]string{
		"GET /v1/me":                            "GET /v1/me",
		"unmatched":                             "unmatched",
		"/v1/me":                                "/v1/me",
		"get /v1/me":                            "GET /v1/me",
		"/v1/ai-agents/agt_123":                 "/v1/ai-agents/{agent_id}",
		"GET /v1/ai-agents/agt_123":             "GET /v1/ai-agents/{agent_id}",
		"PATCH /v1/ai-agents/agt_123/":          "PATCH /v1/ai-agents/{agent_id}",
		" /v1/ai-agents/agt_1/questions?x=1 ":   "/v1/ai-agents/{agent_id}/questions",
		"https://api.example.com/v1/events/e_1": "/v1/events/{event_id}",
		"POST /v1/webhook-endpoints/we_1/deliveries/evt_2/resend": "POST /v1/webhook-endpoints/{endpoint_id}/deliveries/{event_id}/resend",
		"GET /v1/ai-agents/{agent_id}":                            "GET /v1/ai-agents/{agent_id}",
		"/v1/ai-agents/{agent_id}":                                "/v1/ai-agents/{agent_id}",
	} {
		if got, ok := RouteOf(in); !ok || got != want {
			t.Errorf("RouteOf(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "/v1/nope", "DELETE /v1/me", "/v2/me", "GET", "me", "/v1/ai-agents//stats", "/v1/ai-agents/a/b/c/d"} {
		if got, ok := RouteOf(in); ok {
			t.Errorf("RouteOf(%q) = %q, want none", in, got)
		}
	}
}

// A route filter without a method keeps the pattern on every method.
func TestRouteKeeps(t *testing.T) {
	for _, c := range []struct {
		want, route string
		keep        bool
	}{
		{"", "GET /v1/me", true},
		{"GET /v1/me", "GET /v1/me", true},
		{"GET /v1/me", "POST /v1/me", false},
		{"/v1/ai-agents/{agent_id}", "PATCH /v1/ai-agents/{agent_id}", true},
		{"/v1/ai-agents/{agent_id}", "GET /v1/ai-agents/{agent_id}/stats", false},
		{"/v1/ai-agents/{agent_id}", "unmatched", false},
	} {
		if got := routeKeeps(c.want, c.route); got != c.keep {
			t.Errorf("routeKeeps(%q, %q) = %v", c.want, c.route, got)
		}
	}
}
