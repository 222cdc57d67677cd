package api

import (
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
)

// TestAgentNameRules: the name rules of docs/api.md (Names) over
// HTTP: uniqueness after normalisation and full case folding, and a name
// needs a visible character.
func TestAgentNameRules(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		f := newFixture(t, engine)
		key := f.key(allAgentScopes...)
		for _, pair := range [][2]string{{"ΟΔΟΣ", "οδος"}, {"ſupport", "SUPPORT"}, {"Straße", "STRASSE"}} {
			id := f.createAgent(key, pair[0])
			r := f.send("POST", "/v1/ai-agents", key, `{"name":`+quote(pair[1])+`}`)
			r.wantError(t, 409, domain.CodeDuplicateValue, "name:duplicate_value")
			if got := r.body["error"].(map[string]any)["existing_id"]; got != id {
				t.Fatalf("%s after %s: existing_id %v, want %s", pair[1], pair[0], got, id)
			}
		}
		id := f.createAgent(key, "Visible")
		for name, body := range map[string]string{
			"bidi override":    `{"name":"\u202e"}`,
			"bidi isolates":    `{"name":" \u2066\u2067\u2068\u2069 "}`,
			"zero-width":       `{"name":"\u200b\u200c\u200d\u2060\ufeff"}`,
			"combining marks":  `{"name":"\u0301\u0301"}`,
			"hangul filler":    `{"name":"\u3164"}`,
			"mixed invisibles": `{"name":"\u202e\u200b\u0301"}`,
			"raw zero-width":   "{\"name\":\"\u200b\u200b\"}",
		} {
			t.Run(name, func(t *testing.T) {
				f.send("POST", "/v1/ai-agents", key, body).wantError(t, 400, domain.CodeInvalidValue, "name:invalid_value")
				f.send("PATCH", "/v1/ai-agents/"+id, key, body).wantError(t, 400, domain.CodeInvalidValue, "name:invalid_value")
			})
		}
		// Beside visible text, invisible characters are part of the name.
		r := f.send("POST", "/v1/ai-agents", key, `{"name":"\u202eabc\u202c"}`)
		r.wantStatus(t, 201)
		if r.data()["name"] != "\u202eabc\u202c" {
			t.Fatalf("name stored as %+q", r.data()["name"])
		}
	})
}
