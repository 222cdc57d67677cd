package domain

import (
	"slices"
	"strings"
)

// Scope is `<resource>:<action>`.
type Scope string

const (
	ScopeAgentsRead     Scope = "aiagents:read"
	ScopeAgentsWrite    Scope = "aiagents:write"
	ScopeAgentsQuery    Scope = "aiagents:query"
	ScopeStaffRead      Scope = "staff:read"
	ScopeStaffWrite     Scope = "staff:write"
	ScopeHelpdeskRead   Scope = "helpdesk:read"
	ScopeHelpdeskWrite  Scope = "helpdesk:write"
	ScopeSettingsRead   Scope = "settings:read"
	ScopeSettingsWrite  Scope = "settings:write"
	ScopeWebhooksManage Scope = "webhooks:manage"
)

// Scopes is the whole vocabulary, in display order. Only the aiagents scopes
// grant anything callable in v1.
var Scopes = []Scope{
	ScopeAgentsRead, ScopeAgentsWrite, ScopeAgentsQuery,
	ScopeStaffRead, ScopeStaffWrite,
	ScopeHelpdeskRead, ScopeHelpdeskWrite,
	ScopeSettingsRead, ScopeSettingsWrite,
	ScopeWebhooksManage,
}

// scopeInfo is each scope's one-line description, and whether it grants
// anything callable yet: the one place the console, the CLI and the docs
// read them from.
var scopeInfo = map[Scope]struct {
	description string
	reserved    bool
}{
	ScopeAgentsRead:     {description: "List and read AI agents, their instructions and usage."},
	ScopeAgentsWrite:    {description: "Create AI agents, change their instructions, enable and disable them."},
	ScopeAgentsQuery:    {description: "Ask AI agents questions and continue conversations."},
	ScopeStaffRead:      {description: "Read staff members.", reserved: true},
	ScopeStaffWrite:     {description: "Change staff members.", reserved: true},
	ScopeHelpdeskRead:   {description: "Read helpdesk tickets.", reserved: true},
	ScopeHelpdeskWrite:  {description: "Change helpdesk tickets.", reserved: true},
	ScopeSettingsRead:   {description: "Read account settings.", reserved: true},
	ScopeSettingsWrite:  {description: "Change account settings.", reserved: true},
	ScopeWebhooksManage: {description: "Read events and manage webhook endpoints."},
}

// Description is the scope's one-line description ("" for a scope outside
// the vocabulary).
func (s Scope) Description() string { return scopeInfo[s].description }

// Reserved reports whether the scope grants nothing callable in this
// release: it is accepted and stored, for later releases.
func (s Scope) Reserved() bool { return scopeInfo[s].reserved }

// ValidScope reports whether s is in the vocabulary.
func ValidScope(s string) bool { return slices.Contains(Scopes, Scope(s)) }

// Preset is a named set of scopes offered by the console and the CLI.
type Preset struct {
	ID string // CLI id
	// Label is the name the console shows, the same as ID: one name per
	// preset on every page, in the CLI and in the docs (docs/api.md,
	// Scopes and presets).
	Label  string
	Scopes []Scope
}

// Presets are those of docs/api.md (Scopes and presets).
var Presets = []Preset{
	{ID: "aiagent-read", Label: "aiagent-read", Scopes: []Scope{ScopeAgentsRead}},
	{ID: "aiagent-query", Label: "aiagent-query", Scopes: []Scope{ScopeAgentsRead, ScopeAgentsQuery}},
	{ID: "full-access", Label: "full-access", Scopes: Scopes},
}

// PresetByID finds a preset by its CLI id.
func PresetByID(id string) (Preset, bool) {
	i := slices.IndexFunc(Presets, func(p Preset) bool { return p.ID == id })
	if i < 0 {
		return Preset{}, false
	}
	return Presets[i], true
}

// ParseScopes parses a comma-separated scope list, refusing unknown names and
// dropping repeats; the result is in vocabulary order.
func ParseScopes(list string) ([]Scope, error) {
	want := map[Scope]bool{}
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !ValidScope(s) {
			return nil, Errorf(CodeInvalidValue, "unknown scope %q", s)
		}
		want[Scope(s)] = true
	}
	if len(want) == 0 {
		return nil, Errorf(CodeMissingField, "at least one scope is required")
	}
	return NormalizeScopes(want), nil
}

// NormalizeScopes returns the set in vocabulary order.
func NormalizeScopes(set map[Scope]bool) []Scope {
	out := make([]Scope, 0, len(set))
	for _, v := range Scopes {
		if set[v] {
			out = append(out, v)
		}
	}
	return out
}
