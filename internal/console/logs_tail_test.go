package console_test

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/console"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/ratelimit"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

type sse struct{ name, id, data string }

// openTail opens the live tail with query as the signed-in b; its events
// arrive on the channel, which closes when the stream ends.
func openTail(t *testing.T, b *browser, query string) (*http.Response, <-chan sse) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.f.srv.URL+"/console/developers/logs/tail"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	events := make(chan sse, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		var ev sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					events <- ev
				}
				ev = sse{}
			case strings.HasPrefix(line, "event: "):
				ev.name = line[len("event: "):]
			case strings.HasPrefix(line, "id: "):
				ev.id = line[len("id: "):]
			case strings.HasPrefix(line, "data: "):
				if ev.data != "" {
					ev.data += "\n"
				}
				ev.data += line[len("data: "):]
			}
		}
	}()
	return resp, events
}

// next is the stream's next event, or fails after wait.
func next(t *testing.T, events <-chan sse, wait time.Duration) sse {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(wait):
		t.Fatalf("no event in %s", wait)
	}
	return sse{}
}

// The live tail streams a log written after it opened, that its filters
// keep (a 500, not a 200), as a row of the Logs table with the path
// escaped, and stops at its time bound with an "end" event saying so.
func TestLogsTailDeliversNewLogs(t *testing.T) {
	f := newFixture(t, func(c *console.Config) {
		c.LiveTail = console.LiveTail{MaxDuration: 3 * time.Second, Poll: 50 * time.Millisecond}
	})
	a, owner := f.account("Acme")
	k := f.key(a, owner, "Helpdesk bot")
	b := f.signedIn(owner)
	resp, events := openTail(t, b, "?status=5xx")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("tail: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	time.Sleep(200 * time.Millisecond) // the stream has read the store at least once
	now := f.clock.Now()
	writeLog(t, f, a.ID, k.Key.ID, now, "GET", "GET /v1/me", "/v1/me", 200, "")
	bad := writeLog(t, f, a.ID, k.Key.ID, now.Add(time.Millisecond), "GET", "unmatched", `/v1/<img src=x onerror=alert(1)>`, 500, "server_error")
	ev := next(t, events, 5*time.Second)
	if ev.name != "log" || ev.id != bad.ID {
		t.Fatalf("first event %+v, want the 500's log %s", ev, bad.ID)
	}
	wantHolds(t, "the row", ev.data, []string{`data-request-id="` + bad.ID + `"`, `&lt;img src=x onerror=alert(1)&gt;`, `<span class="st st-5xx">500</span>`, `<bdi>Helpdesk bot</bdi>`},
		[]string{`<img`})
	ev = next(t, events, 5*time.Second)
	if ev.name != "end" || !strings.Contains(ev.data, "stopped after 3 seconds") {
		t.Fatalf("after the 500: %+v, want the end", ev)
	}
	if _, ok := <-events; ok {
		t.Error("the stream goes on after its end")
	}
}

// A session has at most LiveTail.PerSession streams open: one more gets
// an "end" at once; another session of the same user has its own. The
// tail needs a session (without one it is the sign-in page's redirect)
// and a manager's role.
func TestLogsTailBounds(t *testing.T) {
	f := newFixture(t, func(c *console.Config) {
		c.LiveTail = console.LiveTail{PerSession: 1, Poll: 50 * time.Millisecond}
	})
	a, owner := f.account("Acme")
	k := f.key(a, owner, "Helpdesk bot")
	b := f.signedIn(owner)
	_, first := openTail(t, b, "")
	_, second := openTail(t, b, "")
	if ev := next(t, second, 5*time.Second); ev.name != "end" || !strings.Contains(ev.data, "already open in 1 tabs") {
		t.Fatalf("a second stream: %+v", ev)
	}
	_, elsewhere := openTail(t, f.signedIn(owner), "")
	l := writeLog(t, f, a.ID, k.Key.ID, f.clock.Now(), "GET", "GET /v1/me", "/v1/me", 200, "")
	for _, events := range []<-chan sse{first, elsewhere} {
		if ev := next(t, events, 5*time.Second); ev.name != "log" || ev.id != l.ID {
			t.Errorf("event %+v, want the log %s", ev, l.ID)
		}
	}
	p := f.browser().get("/console/developers/logs/tail")
	wantRedirect(t, "no session", p, "/console/signin")
	agent := f.user(a, "agent@acme.example", domain.RoleAgent)
	wantStatus(t, "an Agent", f.signedIn(agent).get("/console/developers/logs/tail"), http.StatusNotFound)
	wantStatus(t, "a bad filter", b.get("/console/developers/logs/tail?status=abc"), http.StatusBadRequest)
}

// The live tail on one instance follows a request another instance served:
// it reads what that instance's usage recorder wrote to the shared store
// (PostgreSQL), with the route filter taken from a pasted path.
func TestLogsTailAcrossInstances(t *testing.T) {
	dsn := storetest.PostgresURL(t)
	open := func() *fixture {
		st, err := store.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		mem := ratelimit.NewMemory(nil)
		t.Cleanup(mem.Close)
		return newFixtureOn(t, st, mem, func(c *console.Config) { c.LiveTail.Poll = 50 * time.Millisecond })
	}
	a, b := open(), open()
	acct, _ := a.account("Acme")
	owner := a.user(acct, "tail-owner@acme.example", domain.RoleOwner)
	k := a.key(acct, owner, "tail key")
	_, events := openTail(t, a.signedIn(owner), "?route="+url.QueryEscape("/v1/ai-agents/agt_copied"))
	if st, _ := apiGet(t, b, "/v1/me", k.Credential); st != http.StatusOK {
		t.Fatalf("GET /v1/me: %d", st)
	}
	st, id := apiGet(t, b, "/v1/ai-agents/agt_nope", k.Credential)
	if st != http.StatusNotFound || id == "" {
		t.Fatalf("GET a missing agent: %d %q", st, id)
	}
	if err := b.usage.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, events, 5*time.Second); ev.name != "log" || ev.id != id || !strings.Contains(ev.data, "not_found") {
		t.Fatalf("event %+v, want the 404 %s (and not GET /v1/me)", ev, id)
	}
}
