package console

import "testing"

// The Logs page and the overview are pages of their own in the side
// navigation, not Developers.
func TestNavOf(t *testing.T) {
	for path, want := range map[string]string{
		"/console/developers":                      "developers",
		"/console/developers/keys/key_1":           "developers",
		"/console/developers/logs":                 "developers/logs",
		"/console/developers/logs?key=k":           "developers/logs",
		"/console/developers/webhooks":             "developers/webhooks",
		"/console/developers/webhooks/we_1/rotate": "developers/webhooks",
		"/console/overview":                        "overview",
		"/console/agents/agt_1":                    "agents",
		"/console/":                                "",
	} {
		if got := navOf(path); got != want {
			t.Errorf("navOf(%q) = %q, want %q", path, got, want)
		}
	}
}
