package main

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
)

// TestKeyCreateScopeFlags: --preset and --scopes are one choice. Both or
// neither, an unknown preset or scope, is a usage error (exit 2, the
// command line is wrong).
func TestKeyCreateScopeFlags(t *testing.T) {
	for _, c := range []struct {
		preset, scopes string
		usage, invalid bool
		want           []domain.Scope
	}{
		{preset: "", scopes: "", usage: true},
		{preset: "full-access", scopes: "aiagents:read", usage: true},
		{preset: "root", usage: true},
		{scopes: "aiagents:admin", usage: true},
		{scopes: "aiagents:read", want: []domain.Scope{domain.ScopeAgentsRead}},
		{preset: "aiagent-read", want: []domain.Scope{domain.ScopeAgentsRead}},
	} {
		got, err := scopesFlags(c.preset, c.scopes)
		var de *domain.Error
		switch {
		case errors.Is(err, errUsage) != c.usage:
			t.Errorf("preset %q scopes %q: %v, usage error: %v", c.preset, c.scopes, err, c.usage)
		case (errors.As(err, &de) && de.Code == domain.CodeInvalidValue) != c.invalid:
			t.Errorf("preset %q scopes %q: %v, invalid value: %v", c.preset, c.scopes, err, c.invalid)
		case err == nil && !slices.Equal(got, c.want):
			t.Errorf("preset %q scopes %q: %v, want %v", c.preset, c.scopes, got, c.want)
		}
	}
	if at, err := expiresFlag(""); at != nil || err != nil {
		t.Errorf("no --expires-at: %v %v", at, err)
	}
	if _, err := expiresFlag("2027-01-02"); !errors.Is(err, errUsage) {
		t.Errorf("--expires-at without a time: %v", err)
	}
}

// TestAPICommandParse: flags anywhere on the line, positional arguments
// in order, everything after "--" positional (a question may start with
// a dash, or name --token), and a key flag refused by name only before it.
func TestAPICommandParse(t *testing.T) {
	e := env{getenv: func(string) string { return "" }, stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
	for _, c := range []struct {
		args       []string
		positional []string
		want       []string // nil: refused as a usage error
		errHas     string
	}{
		{[]string{"agt_1", "--name", "N"}, []string{"ID"}, []string{"agt_1"}, ""},
		{[]string{"--name", "N", "agt_1"}, []string{"ID"}, []string{"agt_1"}, ""},
		{[]string{"agt_1", "why", "--name", "N", "not"}, []string{"ID", "WORDS..."}, []string{"agt_1", "why", "not"}, ""},
		{[]string{"agt_1", "--", "--token", "-x"}, []string{"ID", "WORDS..."}, []string{"agt_1", "--token", "-x"}, ""},
		{[]string{"agt_1", "--token=agk_x"}, []string{"ID"}, nil, "there is no --token flag"},
		{[]string{"-api-key", "agk_x", "agt_1"}, []string{"ID"}, nil, "there is no --api-key flag"},
		{[]string{"agt_1", "agt_2"}, []string{"ID"}, nil, "expects ID"},
		{[]string{"agt_1"}, []string{"ID", "WORDS..."}, nil, "expects ID WORDS..."},
		{[]string{"agt_1"}, nil, nil, "expects no arguments"},
		{nil, nil, []string{}, ""},
	} {
		a := e.apiCommand("test")
		a.fs.String("name", "", "")
		got, err := a.parse(c.args, c.positional...)
		if c.want == nil {
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.errHas) {
				t.Errorf("%q: %v, want a usage error with %q", c.args, err, c.errHas)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) && len(got)+len(c.want) > 0 {
			t.Errorf("%q: %q %v, want %q", c.args, got, err, c.want)
		}
	}
}
