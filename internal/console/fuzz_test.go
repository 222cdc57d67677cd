package console

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
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

// FuzzCrossOrigin: the console refuses a POST (with its own 403 page)
// whenever the browser says it comes from elsewhere: Sec-Fetch-Site other
// than same-origin or none (none: a navigation the user started, which no
// other site can cause), or, without it, an Origin that does not name
// exactly the request's host. Nothing is trusted beyond that: no origin or
// path is exempt. Without either header the CSRF token decides.
// passes is whether crossOrigin should let r on: by Sec-Fetch-Site, else
// by Origin's host against the request's, else (no header) yes, left to
// the CSRF token.
func passes(r *http.Request) bool {
	site, origin := r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Origin")
	switch {
	case site != "":
		return site == "same-origin" || site == "none"
	case origin != "":
		u, err := url.Parse(origin)
		return err == nil && u.Host != "" && u.Host == r.Host
	}
	return true
}

func FuzzCrossOrigin(f *testing.F) {
	f.Add("", "", "console.example")
	f.Add("same-origin", "", "console.example")
	f.Add("none", "", "console.example")
	f.Add("same-site", "https://console.example", "console.example")
	f.Add("cross-site", "https://console.example", "console.example")
	f.Add("", "https://console.example", "console.example")
	f.Add("", "https://console.example.evil", "console.example")
	f.Add("", "https://CONSOLE.example", "console.example")
	f.Add("", "null", "console.example")
	passed := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	c := &Console{Config: Config{Log: slog.New(slog.DiscardHandler)}, pages: parsePages(time.Now)}
	h := c.crossOrigin(passed)
	f.Fuzz(func(t *testing.T, site, origin, host string) {
		if host == "" || strings.ContainsAny(host, " /?#@\x00") {
			t.Skip("not a Host a server accepts")
		}
		r := httptest.NewRequest("POST", "/console/signout", nil)
		r.Host = host
		if site != "" {
			r.Header.Set("Sec-Fetch-Site", site)
		}
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		ok := rec.Code == http.StatusTeapot
		if !ok && (rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "came from another site")) {
			t.Fatalf("refused with %d, not the console's 403 page", rec.Code)
		}
		if ok != passes(r) {
			t.Fatalf("Sec-Fetch-Site %q, Origin %q, Host %q: passed %v", r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Origin"), r.Host, ok)
		}
		// A safe method is never refused here.
		get := r.Clone(r.Context())
		get.Method = http.MethodGet
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, get)
		if rec.Code != http.StatusTeapot {
			t.Fatalf("GET refused: %d", rec.Code)
		}
	})
}
