package console_test

import (
	"context"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// seedUsage writes counts of every class for key over the last 30 days
// (scale of them each day, more in the last 24 hours), and n logs over the
// last hour with long paths and IPv6 clients; it returns the 24 hours'
// counts by class.
func seedUsage(t *testing.T, f *fixture, accountID, keyID string, scale int64, n int) map[string]int64 {
	t.Helper()
	now := f.clock.Now()
	day := map[string]int64{}
	var counts []store.UsageCount
	add := func(at time.Time, class string, c int64) {
		if c > 0 {
			counts = append(counts, store.UsageCount{AccountID: accountID, KeyID: keyID, Minute: at.Truncate(time.Minute), Class: class, Count: c})
		}
	}
	for h := range int64(24) {
		at := now.Add(-time.Duration(h) * time.Hour)
		for class, c := range map[string]int64{"2xx": scale * (10 + h), "4xx": scale * (h % 5), "429": scale * (h % 7 / 6 * 6), "5xx": h % 11 / 10 * 2} {
			add(at, class, c)
			day[class] += c
		}
	}
	for d := range int64(29) {
		at := now.Add(-time.Duration(d+2) * 24 * time.Hour)
		for class, c := range map[string]int64{"2xx": scale * (300 + 10*d), "4xx": scale * 5 * (d % 4), "429": scale * 3 * (d % 6), "5xx": d % 9 / 8 * 4} {
			add(at, class, c)
		}
	}
	statuses := []int{200, 200, 201, 404, 429, 200, 500, 400}
	codes := map[int]string{404: "not_found", 429: "rate_limit_exceeded", 500: "server_error", 400: "invalid_field"}
	logs := make([]requestlog.Log, n)
	for i := range logs {
		at := now.Add(-time.Duration(i) * 37 * time.Second)
		st := statuses[i%len(statuses)]
		logs[i] = requestlog.Log{ID: domain.NewRequestID(at), AccountID: accountID, KeyID: keyID, At: at, Method: "POST",
			Route: "POST /v1/ai-agents/{id}/questions", Path: "/v1/ai-agents/agt_01JD8ZQ2X8M4V7N3K5P6R9T2WX/questions", Status: st,
			ErrorCode: codes[st], Duration: time.Duration(1000+i*7919%90000) * time.Microsecond, Client: "2001:db8:85a3:1234:5678:8a2e:370:7334"}
	}
	if err := f.st.WriteUsage(context.Background(), logs, counts); err != nil {
		t.Fatal(err)
	}
	return day
}

var busyRowRE = regexp.MustCompile(`<tr data-key-id="([^"]+)">[\s\S]*?<td class="num">([\d,]+)</td>[\s\S]*?<td class="num error-share">([^<]+)</td>`)

// The overview charts the account's keys together and lists its busiest
// keys, busiest first, with their share of errors; an Agent gets 404.
func TestOverview(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	busy, quiet := f.key(a, owner, "Busy"), f.key(a, owner, "Quiet")
	day := seedUsage(t, f, a.ID, busy.Key.ID, 3, 0)
	if err := f.st.WriteUsage(context.Background(), nil, []store.UsageCount{
		{AccountID: a.ID, KeyID: quiet.Key.ID, Minute: f.clock.Now().Truncate(time.Minute), Class: "2xx", Count: 3},
		{AccountID: a.ID, KeyID: quiet.Key.ID, Minute: f.clock.Now().Truncate(time.Minute), Class: "5xx", Count: 1}}); err != nil {
		t.Fatal(err)
	}
	b := f.signedIn(owner)
	p := b.get("/console/overview")
	wantStatus(t, "overview", p, 200)
	total := day["2xx"] + day["4xx"] + day["429"] + day["5xx"]
	rows := busyRowRE.FindAllStringSubmatch(p.body, -1)
	if len(rows) != 2 || rows[0][1] != busy.Key.ID || rows[1][1] != quiet.Key.ID || rows[1][2] != "4" || rows[1][3] != "25.0 %" {
		t.Fatalf("busiest keys %q, want Busy then Quiet (4 requests, 25.0 %% errors)", rows)
	}
	if want := strconv.FormatInt(total, 10); strings.ReplaceAll(rows[0][2], ",", "") != want {
		t.Errorf("Busy's requests %s, want %s", rows[0][2], want)
	}
	if got := chartTotals(t, p.body); got["5xx"] != int(day["5xx"])+1 || got["2xx"] != int(day["2xx"])+3 {
		t.Errorf("the 24 hours' chart %v, want the two keys' counts summed", got)
	}
	if !strings.Contains(p.body, `id="nav-overview" class="current"`) {
		t.Error("the navigation does not mark Overview")
	}
	_, emptyOwner := f.account("Empty")
	eb := f.signedIn(emptyOwner)
	for _, c := range []struct{ path, want string }{{"/console/overview", `No requests in the last 24 hours`}, {"/console/overview?range=30d", `No requests in the last 30 days`}} {
		if empty := eb.get(c.path); !strings.Contains(empty.body, c.want) || !strings.Contains(empty.body, `data-total="0"`) {
			t.Errorf("an account without requests: %s lacks %q", c.path, c.want)
		}
	}
	if p := f.signedIn(f.user(a, "agent@acme.example", domain.RoleAgent)).get("/console/overview"); p.status != 404 {
		t.Errorf("an Agent opened the overview: %d", p.status)
	}
}

// The charts' colours are the SVG's own attributes (they need no
// stylesheet), a colour per class, the same in the legend.
func TestChartFills(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	k := f.key(a, owner, "Charted")
	seedUsage(t, f, a.ID, k.Key.ID, 1, 0)
	p := f.signedIn(owner).get("/console/developers/keys/" + k.Key.ID)
	wantStatus(t, "key page", p, 200)
	fills := map[string]string{}
	for _, m := range regexp.MustCompile(`<rect data-class="([^"]+)" data-count="\d+" fill="([^"]+)"`).FindAllStringSubmatch(p.body, -1) {
		if old, ok := fills[m[1]]; ok && old != m[2] {
			t.Errorf("class %s drawn in %s and %s", m[1], old, m[2])
		}
		fills[m[1]] = m[2]
	}
	seen := map[string]bool{}
	for _, cl := range requestlog.Classes {
		if fills[cl] == "" || seen[fills[cl]] {
			t.Errorf("class %s: fill %q (fills %v)", cl, fills[cl], fills)
		}
		seen[fills[cl]] = true
		if !strings.Contains(p.body, `<li data-class="`+cl+`"><svg width="12" height="12" aria-hidden="true"><rect width="12" height="12" rx="2" fill="`+fills[cl]+`">`) {
			t.Errorf("the legend lacks %s in %s", cl, fills[cl])
		}
	}
	if !regexp.MustCompile(`<text x="-6" y="20.0" dy="4" text-anchor="end" class="ytick">[0-9,]+</text>`).MatchString(p.body) {
		t.Error("no top y-axis tick")
	}
}

// The key filter finds a key by its id, prefix or name (any case), or by
// the one key a part of them matches; a filter naming no key, or a bad
// status, shows the form again with the field marked and no logs.
func TestLogsKeyFilter(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	one, two := f.key(a, owner, "Helpdesk bot"), f.key(a, owner, "Billing sync")
	seedUsage(t, f, a.ID, one.Key.ID, 1, 3)
	seedUsage(t, f, a.ID, two.Key.ID, 1, 5)
	b := f.signedIn(owner)
	for q, want := range map[string]int{one.Key.ID: 3, one.Key.Prefix: 3, strings.ToUpper(two.Key.Prefix): 5,
		"helpdesk BOT": 3, "billing": 5, "": 8} {
		p := b.get("/console/developers/logs?key=" + url.QueryEscape(q))
		wantStatus(t, "logs by key "+q, p, 200)
		if n := strings.Count(p.body, "data-request-id="); n != want {
			t.Errorf("key=%q: %d logs, want %d", q, n, want)
		}
	}
	for _, c := range []struct{ query, field, msg string }{
		{"key=nobody", "key", "No key of this account has this name, prefix or id."},
		{"key=l", "key", "More than one key matches"},
		{"status=abc", "status", "Enter a status class"},
		{"from=yesterday", "from", "Enter a time as"},
		{"from=2026-11-22T14:05&to=2026-11-22T14:00", "to", "Enter a To time after the From time."},
	} {
		p := b.get("/console/developers/logs?" + c.query)
		wantStatus(t, c.query, p, 400)
		if !strings.Contains(p.body, `id="log-filters"`) || !strings.Contains(p.body, `name="`+c.field+`" id="filter-`+c.field+`"`) ||
			!regexp.MustCompile(`name="`+c.field+`"[^>]*aria-invalid="true" aria-describedby="`+c.field+`-error"`).MatchString(p.body) ||
			!strings.Contains(p.body, `id="`+c.field+`-error">`+c.msg) ||
			strings.Contains(p.body, "data-request-id=") {
			t.Errorf("%s: not the form with %s marked and %q:\n%s", c.query, c.field, c.msg, p.body)
		}
	}
}
