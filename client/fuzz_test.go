package client

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzParseError: whatever a server (or something in front of it) sends,
// the client builds an *Error that keeps the status, takes the code only
// from a real envelope, and never holds a negative or absurd Retry-After.
func FuzzParseError(f *testing.F) {
	f.Add(400, `{"error":{"code":"invalid_value","message":"m","errors":[{"field":"name","code":"invalid_value","message":"x"}]}}`, "")
	f.Add(409, `{"error":{"code":"duplicate_value","message":"m","existing_id":"agt_1"}}`, "")
	f.Add(429, `{"error":{"code":"rate_limit_exceeded","message":"slow down"}}`, "17")
	f.Add(502, `<html>bad gateway</html>`, "Wed, 21 Oct 2015 07:28:00 GMT")
	f.Add(503, `{"error":null}`, "-5")
	f.Add(500, `{"error":{"code":5}}`, "99999999999999999999")
	f.Add(404, `[]`, " 3 ")
	f.Fuzz(func(t *testing.T, status int, body, retryAfter string) {
		if status < 100 || status > 999 {
			return
		}
		h := http.Header{}
		h.Set("Retry-After", retryAfter)
		h.Set("X-Request-Id", "req_1")
		e := parseError(status, h, []byte(body))
		if e.StatusCode != status || e.RequestID != "req_1" {
			t.Fatalf("status %d, request id %q", e.StatusCode, e.RequestID)
		}
		if e.RetryAfter < 0 || e.RetryAfter > 24*time.Hour {
			t.Fatalf("Retry-After %q gave %v", retryAfter, e.RetryAfter)
		}
		var env struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		real := json.Unmarshal([]byte(body), &env) == nil && env.Error.Code != ""
		switch {
		case real && e.Code != env.Error.Code:
			t.Fatalf("code %q, envelope says %q", e.Code, env.Error.Code)
		case !real && status >= 500 && e.Code != CodeServerError:
			t.Fatalf("5xx without an envelope has code %q", e.Code)
		case !real && status < 500 && e.Code != "":
			t.Fatalf("code %q invented for %q", e.Code, body)
		}
		if e.Error() == "" {
			t.Fatalf("Error() = %q", e.Error())
		}
	})
}

// FuzzCheckKey: a key is accepted only in its exact form, and the error
// never contains any of it.
func FuzzCheckKey(f *testing.F) {
	f.Add("agk_live_abcdefghijkl_0123456789abcdefghijABCDEFGHIJ012345")
	f.Add("agk_test_000000000000_" + strings.Repeat("z", 38))
	f.Add("")
	f.Fuzz(func(t *testing.T, key string) {
		prefix, err := checkKey(key)
		if err != nil {
			if err != errKeyForm {
				t.Fatalf("error %v", err)
			}
			return
		}
		if len(key) != 60 || !strings.HasPrefix(key, "agk_") || key[9:21] != prefix || strings.ContainsAny(key, " \t\r\n") {
			t.Fatalf("accepted %q", key)
		}
	})
}
