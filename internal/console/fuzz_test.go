package console

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzSafeNext: whatever arrives in ?next=, the redirect after sign-in stays
// on this site, inside the console, and off the sign-in page.
func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"", "/console/developers", "//evil.example", "/console/\\evil", "https://evil.example/console/",
		"/console/signin?next=/console/", "/console/../x", "/console/%0d%0aSet-Cookie:x", "/console/\r\nx"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, next string) {
		got := safeNext(next)
		if got == "" {
			return
		}
		if got != next {
			t.Fatalf("safeNext(%q) = %q: it keeps or drops, never rewrites", next, got)
		}
		u, err := url.Parse(got)
		if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(u.Path, "/console/") {
			t.Fatalf("safeNext(%q) = %q leaves the console (%v)", next, got, err)
		}
		if strings.ContainsAny(got, "\\\r\n") || strings.HasPrefix(got, "/console/signin") {
			t.Fatalf("safeNext(%q) = %q", next, got)
		}
	})
}

// FuzzSameOrigin: a POST is same-origin only if the browser says so, or its
// Origin names exactly the request's host.
func FuzzSameOrigin(f *testing.F) {
	f.Add("", "", "console.example")
	f.Add("same-origin", "", "console.example")
	f.Add("cross-site", "https://console.example", "console.example")
	f.Add("", "https://console.example", "console.example")
	f.Add("", "https://console.example.evil", "console.example")
	f.Add("", "null", "console.example")
	f.Fuzz(func(t *testing.T, site, origin, host string) {
		r := httptest.NewRequest("POST", "/console/signout", nil)
		r.Host = host
		if site != "" {
			r.Header.Set("Sec-Fetch-Site", site)
		}
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		ok := sameOrigin(r)
		site, origin = r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Origin")
		switch {
		case site != "":
			if ok != (site == "same-origin") {
				t.Fatalf("Sec-Fetch-Site %q: %v", site, ok)
			}
		case origin != "":
			u, err := url.Parse(origin)
			want := err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
			if ok != want {
				t.Fatalf("Origin %q, Host %q: %v", origin, r.Host, ok)
			}
		default:
			if !ok {
				t.Fatal("no header: left to the CSRF token")
			}
		}
	})
}
