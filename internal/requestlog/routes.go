package requestlog

import (
	"net/url"
	"strings"
)

// Unmatched is the route a log names when no /v1 route matched its path.
const Unmatched = "unmatched"

// Routes are the /v1 routes a request log can name, as the router's
// patterns (internal/api/routes.go) and in the OpenAPI document's order:
// the Logs page's route picker. GET /v1/openapi.json is left out: it is
// served without a key, so it is never logged. A console test holds the
// list to the OpenAPI document.
var Routes = []string{
	"GET /v1/me",
	"GET /v1/ai-agents",
	"POST /v1/ai-agents",
	"GET /v1/ai-agents/{agent_id}",
	"PATCH /v1/ai-agents/{agent_id}",
	"PUT /v1/ai-agents/{agent_id}/enabled",
	"GET /v1/ai-agents/{agent_id}/stats",
	"POST /v1/ai-agents/{agent_id}/questions",
	"GET /v1/events",
	"GET /v1/events/{event_id}",
	"GET /v1/webhook-endpoints",
	"POST /v1/webhook-endpoints",
	"GET /v1/webhook-endpoints/{endpoint_id}",
	"PATCH /v1/webhook-endpoints/{endpoint_id}",
	"DELETE /v1/webhook-endpoints/{endpoint_id}",
	"POST /v1/webhook-endpoints/{endpoint_id}/rotate-secret",
	"POST /v1/webhook-endpoints/{endpoint_id}/test",
	"GET /v1/webhook-endpoints/{endpoint_id}/deliveries",
	"POST /v1/webhook-endpoints/{endpoint_id}/deliveries/{event_id}/resend",
}

// RouteOf is the route filter s names: a route of Routes or Unmatched as
// it is; else a request line or path, as the Logs table shows one or a
// browser's address bar holds one ("GET /v1/ai-agents/agt_123",
// "/v1/ai-agents/agt_123?limit=5", "https://host/v1/me"), as the route
// whose pattern matches it. A path without a method names the pattern of
// every method ("/v1/ai-agents/{agent_id}"), which Filter matches on any
// method. False when s names no route.
func RouteOf(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if s == Unmatched {
		return s, true
	}
	method, path, hasMethod := strings.Cut(s, " ")
	if !hasMethod {
		method, path = "", s
	}
	method, path = strings.ToUpper(method), pathOf(strings.TrimSpace(path))
	if path == "" {
		return "", false
	}
	var found string
	for _, r := range Routes {
		m, pattern, _ := strings.Cut(r, " ")
		if !patternMatches(pattern, path) {
			continue
		}
		switch {
		case method == m:
			return r, true
		case method == "":
			found = pattern
		}
	}
	return found, found != ""
}

// pathOf is s's path: without scheme, host, query or fragment, and
// without a trailing slash.
func pathOf(s string) string {
	if i := strings.Index(s, "/v1"); i > 0 && strings.Contains(s[:i], "://") {
		s = s[i:]
	}
	s, _, _ = strings.Cut(s, "?")
	s, _, _ = strings.Cut(s, "#")
	if u, err := url.PathUnescape(s); err == nil && !strings.ContainsAny(u, "?#") {
		s = u
	}
	if len(s) > 1 {
		s = strings.TrimSuffix(s, "/")
	}
	if !strings.HasPrefix(s, "/v1/") {
		return ""
	}
	return s
}

// patternMatches reports whether path fits pattern, segment by segment: a
// {name} segment takes any non-empty one.
func patternMatches(pattern, path string) bool {
	ps, xs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(xs) {
		return false
	}
	for i, p := range ps {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			if xs[i] == "" {
				return false
			}
		} else if p != xs[i] {
			return false
		}
	}
	return true
}

// routeKeeps reports whether a log of route passes the route filter want:
// a route exactly, or a pattern without its method (RouteOf) on any
// method.
func routeKeeps(want, route string) bool {
	if want == "" || want == route {
		return true
	}
	if strings.HasPrefix(want, "/") {
		_, pattern, ok := strings.Cut(route, " ")
		return ok && pattern == want
	}
	return false
}
