package api

import (
	"bytes"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/wire"
)

func TestAppendMeMatchesEncodingJSON(t *testing.T) {
	when := "2026-11-27T01:02:03.004Z"
	cases := []keyObject{
		{},
		{Key: wire.Key{Scopes: []domain.Scope{}}, AllowedIPs: []string{}},
		{Key: wire.Key{ID: "key_1", Name: "n", Prefix: "aa_live_x", Scopes: []domain.Scope{"agents:read", "agents:write"},
			RateLimitPerMinute: 600, LastUsedAt: &when, ExpiresAt: &when}, AllowedIPs: []string{"10.0.0.0/8", "::1/128"}},
	}
	for _, s := range trickyStrings {
		cases = append(cases, keyObject{Key: wire.Key{ID: s, Name: s, Description: s, Prefix: s,
			Scopes: []domain.Scope{domain.Scope(s)}, RateLimitPerMinute: -1, LastUsedAt: &s}, AllowedIPs: []string{s}})
	}
	for _, k := range cases {
		if got, want := appendMe(nil, k), encodeStd(t, single{Data: k}); !bytes.Equal(got, want) {
			t.Errorf("appendMe = %s\nencoding/json %s", got, want)
		}
	}
}
