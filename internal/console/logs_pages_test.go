package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

var logRowRE = regexp.MustCompile(`data-request-id="([^"]+)"`)

// The Logs page pages both ways: forward through one key's 160 logs (four
// pages, the other key's left out by the filter every link keeps), then
// back by Previous, each page as it was forwards, the first without a
// Previous link.
func TestLogsPagesBothWays(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	one, two := f.key(a, owner, "Helpdesk bot"), f.key(a, owner, "Billing sync")
	seedUsage(t, f, a.ID, one.Key.ID, 1, 160)
	seedUsage(t, f, a.ID, two.Key.ID, 1, 30)
	b := f.signedIn(owner)
	seen, pages := walkPages(t, b, "/console/developers/logs?key="+url.QueryEscape(one.Key.Prefix), logRowRE)
	if len(seen) != 160 || pages != 4 {
		t.Fatalf("%d logs over %d pages, want 160 over 4", len(seen), pages)
	}
}

// A link's trail of earlier pages stays at most 8 long: 11 pages in,
// Previous reaches the 8 pages before, exactly, and from there only
// « First; a trail too long or not a cursor is a bad link.
func TestLogsPreviousIsBounded(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k := f.key(a, owner, "Busy")
	seedUsage(t, f, a.ID, k.Key.ID, 1, 600)
	b := f.signedIn(owner)
	path := "/console/developers/logs"
	var forward []string
	var p page
	for range 11 {
		var ids []string
		p, ids = listPage(t, b, path, logRowRE)
		forward = append(forward, strings.Join(ids, " "))
		path = pageLink(nextPageRE, p)
		if n := strings.Count(path, "back="); n > 8 {
			t.Fatalf("next link carries %d earlier pages: %s", n, path)
		}
	}
	for i := 9; i >= 2; i-- {
		path = pageLink(prevPageRE, p)
		var ids []string
		p, ids = listPage(t, b, path, logRowRE)
		if got := strings.Join(ids, " "); got != forward[i] {
			t.Fatalf("page %d read backwards (%s) differs from forwards", i+1, path)
		}
	}
	if prev, first := pageLink(prevPageRE, p), pageLink(regexp.MustCompile(`href="([^"]+)" id="first-page"`), p); prev != "" || first != "/console/developers/logs" {
		t.Fatalf("page 3 past the trail: previous %q, first %q", prev, first)
	}
	for _, q := range []string{"back=nonsense", "back=b1." + k.Key.ID, strings.Repeat("back=first&", 9)} {
		wantStatus(t, q, b.get(path+"&"+q), http.StatusBadRequest)
	}
}
