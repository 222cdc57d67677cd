package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/store/storetest"
)

// hookReceiver is a webhook endpoint on loopback: it reports each
// delivery's webhook-id and answers with hold's choice.
type hookReceiver struct {
	srv *httptest.Server
	ids chan string
}

// newHookReceiver answers the first delivery with first (which may hold
// it) and every later one 204.
func newHookReceiver(t *testing.T, first http.HandlerFunc) *hookReceiver {
	t.Helper()
	r := &hookReceiver{ids: make(chan string, 10)}
	var n atomic.Int32
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// Read to the end, so that the server notices the connection
		// closing (a killed sender) and cancels the request's context.
		_, _ = io.Copy(io.Discard, req.Body)
		r.ids <- req.Header.Get("webhook-id")
		if n.Add(1) == 1 {
			first(w, req)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) next(t *testing.T, within time.Duration) string {
	t.Helper()
	select {
	case id := <-r.ids:
		return id
	case <-time.After(within):
		t.Fatalf("no delivery within %s", within)
		return ""
	}
}

// hookSetup makes an account with a full-access key, starts serve
// allowed to deliver to loopback, subscribes r to agent events and
// creates one agent (one event). It returns the database, the key, the
// server and the endpoint's id.
func hookSetup(t *testing.T, engine string, r *hookReceiver) (db, key string, s *server, endpoint string) {
	t.Helper()
	db = filepath.Join(t.TempDir(), "hooks.db")
	if engine == "postgres" {
		db = storetest.PostgresURL(t)
	}
	acct := mustCLI(t, db, "", "account", "create", "--name", "Hooks")
	mustCLI(t, db, "long enough password\n", "user", "create", "--account", acct, "--email", "h@example.com", "--role", "owner")
	key = mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "h@example.com", "--name", "k", "--preset", "full-access")
	s = startServer(t, nil, "--db", db, "--webhook-allow", "127.0.0.0/8")
	code, body, _ := call(t, "POST", s.base+"/v1/webhook-endpoints", key, `{"url":"`+r.srv.URL+`","enabled_events":["ai_agent.*"]}`)
	if code != 201 {
		t.Fatalf("create endpoint: %d %v", code, body)
	}
	endpoint = body["data"].(map[string]any)["id"].(string)
	if code, body, _ := call(t, "POST", s.base+"/v1/ai-agents", key, `{"name":"Scout"}`); code != 201 {
		t.Fatalf("create agent: %d %v", code, body)
	}
	return db, key, s, endpoint
}

// agentEvents lists the ai_agent events serve at base has.
func agentEvents(t *testing.T, base, key string) []string {
	t.Helper()
	code, body, _ := call(t, "GET", base+"/v1/events?limit=100&type=ai_agent.*", key, "")
	if code != 200 {
		t.Fatalf("list events: %d %v", code, body)
	}
	var ids []string
	for _, ev := range body["data"].([]any) {
		ids = append(ids, ev.(map[string]any)["id"].(string))
	}
	return ids
}

// TestDeliveryAfterKill9: serve killed while a delivery is in the
// receiver's hands delivers it again after a restart, once the dead
// attempt's 30 s lease ran out, with the same webhook-id; the event is
// there, once.
func TestDeliveryAfterKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kills serve and waits out a 30 s lease")
	}
	eachEngineParallel(t, deliveryAfterKill9)
}

// eachEngineParallel runs fn on SQLite and on PostgreSQL at once (each
// waits mostly on a lease or a receiver).
func eachEngineParallel(t *testing.T, fn func(t *testing.T, engine string)) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			fn(t, engine)
		})
	}
}

func deliveryAfterKill9(t *testing.T, engine string) {
	r := newHookReceiver(t, func(w http.ResponseWriter, req *http.Request) {
		select { // held until serve dies (a minute at most)
		case <-req.Context().Done():
		case <-time.After(time.Minute):
		}
	})
	db, key, s, _ := hookSetup(t, engine, r)
	first := r.next(t, 10*time.Second)
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	exit := <-s.done
	s.done <- exit
	killed := time.Now()

	s2 := startServer(t, nil, "--db", db, "--webhook-allow", "127.0.0.0/8")
	again := r.next(t, 45*time.Second)
	if again != first {
		t.Fatalf("after the restart webhook-id %q, before %q", again, first)
	}
	t.Logf("delivered again %s after kill -9", time.Since(killed).Round(time.Second))
	if evs := agentEvents(t, s2.base, key); len(evs) != 1 || evs[0] != first {
		t.Fatalf("events after kill -9: %v, want the one acknowledged write's %s", evs, first)
	}
}

// TestGracefulStopRecordsTheAttempt: SIGTERM while a delivery is in
// flight waits for its answer and records it: after a restart the
// delivery is not made again and its attempt is in the log.
func TestGracefulStopRecordsTheAttempt(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and restarts serve")
	}
	eachEngineParallel(t, gracefulStopRecordsTheAttempt)
}

func gracefulStopRecordsTheAttempt(t *testing.T, engine string) {
	r := newHookReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(1500 * time.Millisecond)
		w.WriteHeader(http.StatusNoContent)
	})
	db, key, s, endpoint := hookSetup(t, engine, r)
	first := r.next(t, 10*time.Second)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if exit := <-s.done; exit != nil {
		t.Fatalf("exit after SIGTERM: %v", exit)
	}
	s.done <- nil

	s2 := startServer(t, nil, "--db", db, "--webhook-allow", "127.0.0.0/8")
	code, body, _ := call(t, "GET", s2.base+"/v1/webhook-endpoints/"+endpoint+"/deliveries", key, "")
	if code != 200 {
		t.Fatalf("deliveries: %d %v", code, body)
	}
	attempts := body["data"].([]any)
	if len(attempts) != 1 {
		t.Fatalf("attempts after a graceful stop: %v, want the one made", attempts)
	}
	a := attempts[0].(map[string]any)
	if a["event_id"] != first || a["status"] != "succeeded" {
		t.Fatalf("attempt after a graceful stop: %v", a)
	}
	select {
	case id := <-r.ids:
		t.Fatalf("delivered %s again after a graceful stop", id)
	case <-time.After(3 * time.Second):
	}
}
