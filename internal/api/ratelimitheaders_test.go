package api

import (
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/ratelimit"
)

// setRateHeadersSimply is setRateHeaders as it was written before its
// values shared one string: the reference it must match.
func setRateHeadersSimply(h http.Header, res ratelimit.Result, now time.Time, policy string) {
	reset := res.Reset.Unix()
	secs := max(reset-now.Unix(), 0)
	limit, remaining := strconv.Itoa(res.Limit), strconv.Itoa(res.Remaining)
	h["X-Ratelimit-Limit"] = []string{limit}
	h["X-Ratelimit-Remaining"] = []string{remaining}
	h["X-Ratelimit-Reset"] = []string{strconv.FormatInt(reset, 10)}
	h["Ratelimit-Policy"] = []string{`"` + policy + `";q=` + limit + ";w=60"}
	h["Ratelimit"] = []string{`"` + policy + `";r=` + remaining + ";t=" + strconv.FormatInt(secs, 10)}
}

func TestSetRateHeadersMatchesReference(t *testing.T) {
	now := time.Unix(1_764_000_000, 500_000_000)
	for _, res := range []ratelimit.Result{
		{Allowed: true, Limit: 120, Remaining: 119, Reset: now.Add(60 * time.Second)},
		{Limit: 100_000_000, Remaining: 0, Reset: now.Add(-time.Hour), RetryAfter: time.Second},
		{Limit: 0, Remaining: -1, Reset: time.Time{}},
		{Limit: 1 << 62, Remaining: 1<<62 - 1, Reset: time.Unix(1<<40, 0)},
	} {
		for _, policy := range []string{"per-key", "per-address"} {
			got, want := http.Header{"Other": {"kept"}}, http.Header{"Other": {"kept"}}
			setRateHeaders(got, res, now, policy)
			setRateHeadersSimply(want, res, now, policy)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%+v %s:\n got %v\nwant %v", res, policy, got, want)
			}
			// The values share an array: adding to one must not touch
			// its neighbour.
			got.Add("X-Ratelimit-Limit", "1")
			if v := got.Values("X-Ratelimit-Remaining"); len(v) != 1 || v[0] != want.Get("X-Ratelimit-Remaining") {
				t.Fatalf("an Add to one rate-limit field changed the next: %q", v)
			}
		}
	}
}
