package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
)

// TestKeylessLimitPerIPv6Network: the per-address limit of requests
// without a key counts an IPv6 client's /64, not each address in it; the
// request log keeps the full address.
func TestKeylessLimitPerIPv6Network(t *testing.T) {
	f := newFixture(t, "sqlite", func(c *Config) { c.UnauthRateLimit = 2 })
	for i, remote := range []string{"[2001:db8:1:2::1]:5000", "[2001:db8:1:2:ffff::9]:5000", "[2001:db8:1:2::77]:5000"} {
		r := f.do(req{method: "GET", path: "/v1/me", remote: remote})
		if i < 2 {
			r.wantError(t, http.StatusUnauthorized, domain.CodeInvalidCredentials)
		} else {
			r.wantError(t, http.StatusTooManyRequests, domain.CodeRateLimitExceeded)
		}
	}
	// Another /64 has its own budget.
	f.do(req{method: "GET", path: "/v1/me", remote: "[2001:db8:1:3::1]:5000"}).wantError(t, http.StatusUnauthorized, domain.CodeInvalidCredentials)
	if !strings.Contains(f.logs.String(), `"remote":"2001:db8:1:2:ffff::9"`) {
		t.Fatalf("the log lost the full address:\n%s", f.logs)
	}
}
