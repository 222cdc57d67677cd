package api

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/wire"
)

// meObject is the keyObject, GET /me's wire shape, for k used last at
// lastUsed: what appendMeBody writes without building it.
func meObject(k domain.APIKey, lastUsed time.Time) keyObject {
	return keyObject{Key: wire.Key{
		ID: k.ID, Name: k.Name, Description: k.Description, Prefix: k.Prefix,
		Scopes: k.Scopes, RateLimitPerMinute: k.RateLimitPerMinute,
		LastUsedAt: formatTimePtr(&lastUsed), ExpiresAt: formatTimePtr(k.ExpiresAt),
	}, AllowedIPs: k.AllowedIPs.Strings()}
}

// TestAppendMeBodyMatchesKeyObject: GET /me's body written from the key is
// byte for byte encoding/json's of the keyObject.
func TestAppendMeBodyMatchesKeyObject(t *testing.T) {
	zone := time.FixedZone("x", -(3*3600 + 1800))
	far := time.Date(12000, 1, 2, 3, 4, 5, 0, time.UTC)
	soon := time.Date(2026, 11, 25, 23, 59, 59, 999_999_999, zone)
	times := []time.Time{{}, time.Unix(0, 1_700_000_000_123_456_789), soon, far, time.Date(-5, 3, 1, 0, 0, 0, 0, time.UTC)}
	lists := []domain.AllowList{nil, {}, {
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("2001:db8::1/128"),
	}}
	for i, s := range trickyStrings {
		for j, at := range times {
			exp := times[(i+j)%len(times)]
			for _, k := range []domain.APIKey{
				{ID: "key_1", Name: s, Description: s, Prefix: "abc", Scopes: []domain.Scope{"aiagents:read", domain.Scope(s)}, RateLimitPerMinute: 120},
				{ID: s, Scopes: nil, RateLimitPerMinute: -1, ExpiresAt: &exp, AllowedIPs: lists[i%len(lists)]},
				{Scopes: []domain.Scope{}, ExpiresAt: &at, AllowedIPs: lists[(i+j)%len(lists)]},
			} {
				want := encodeStd(t, single{Data: meObject(k, at)})
				if got := appendMeBody(nil, &k, at); !bytes.Equal(got, want) {
					t.Fatalf("me body\n got %s\nwant %s", got, want)
				}
			}
		}
	}
}
