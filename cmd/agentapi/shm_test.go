package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// TestServeWhileAnotherProcessWrites: serve answers /v1/me reads and agent
// creates on a SQLite file while the CLI, another process, writes to the
// same file in a loop. Nothing in serve may open or close a descriptor of
// the database's files behind the driver's back (on Linux that drops every
// POSIX lock the process holds on the file, SQLite's own included, and the
// next process to open the database rebuilds the shared memory under the
// live server): no answer is 5xx, every create answered 201 is listed, and
// no create answered otherwise was saved.
//
// It runs for 6 s; AGENTAPI_SHM_TEST_SECONDS makes it longer (the audit
// that found the problem ran 30 s).
func TestServeWhileAnotherProcessWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("runs serve and the CLI side by side for seconds")
	}
	run := shmRunLength(t)
	db := filepath.Join(t.TempDir(), "shm.db")
	key, churnID := shmSeed(t, db)
	s := startServer(t, nil, "--db", db)
	c := &shmClient{base: s.base, key: key, client: &http.Client{Timeout: 30 * time.Second}}

	tally := &shmTally{acked: map[string]string{}, refused: map[string]string{}}
	deadline := time.Now().Add(run)
	var wg sync.WaitGroup
	// The other process: set-rate-limit on another key, alternating values,
	// each run opening, writing and closing the database; at least 4 runs
	// (a loaded machine starts the race-built binary slowly), and the load
	// lasts as long as they do.
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(stop)
		tally.churnCLI(t, db, churnID, deadline)
	}()
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tally.readMe(c, stop)
		}()
	}
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tally.createAgents(c, w, stop)
		}()
	}
	wg.Wait()

	shmCheckTally(t, tally)

	// The list, page by page, holds every acknowledged create and none of
	// the refused ones.
	listed := shmListAgents(t, c)
	shmCheckListed(t, tally, listed)

	openIntact(t, db)
	t.Logf("%s: %d CLI writes, %d reads, %d creates acknowledged, %d refused", run, tally.cliRuns, tally.reads, len(tally.acked), len(tally.refused))
}

// shmRunLength is how long TestServeWhileAnotherProcessWrites loads the
// server: 6 s, or AGENTAPI_SHM_TEST_SECONDS.
func shmRunLength(t *testing.T) time.Duration {
	t.Helper()
	run := 6 * time.Second
	if v := os.Getenv("AGENTAPI_SHM_TEST_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("AGENTAPI_SHM_TEST_SECONDS=%q: want a positive number of seconds", v)
		}
		run = time.Duration(n) * time.Second
	}
	return run
}

// shmSeed makes the account, its owner, the load key (returned as its
// credential) and the churn key the CLI rewrites (returned as its id).
func shmSeed(t *testing.T, db string) (key, churnID string) {
	t.Helper()
	acct := mustCLI(t, db, "", "account", "create", "--name", "Shm")
	mustCLI(t, db, "long enough password\n", "user", "create", "--account", acct, "--email", "shm@example.com", "--role", "owner")
	key = mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "shm@example.com", "--name", "load",
		"--preset", "full-access", "--rate-limit", "1000000")
	var churn struct{ ID string }
	if err := json.Unmarshal([]byte(mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "shm@example.com",
		"--name", "churn", "--preset", "aiagent-read", "--json")), &churn); err != nil {
		t.Fatal(err)
	}
	return key, churn.ID
}

// shmClient sends TestServeWhileAnotherProcessWrites's requests with the
// load key.
type shmClient struct {
	base, key string
	client    *http.Client
}

func (c *shmClient) do(method, path, body string) (int, []byte, error) {
	req, _ := http.NewRequest(method, c.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

// shmTally is what TestServeWhileAnotherProcessWrites's load saw.
type shmTally struct {
	mu       sync.Mutex
	failed   []string          // transport errors, 5xx, and reads not 200
	acked    map[string]string // id → name, answered 201
	refused  map[string]string // name → what came back instead
	reads    int
	cliRuns  int
	cliFails []string
}

// churnCLI runs `key set-rate-limit` on the churn key, alternating values,
// at least 4 times and until deadline.
func (l *shmTally) churnCLI(t *testing.T, db, churnID string, deadline time.Time) {
	for i := 0; i < 4 || time.Now().Before(deadline); i++ {
		cmd := exec.Command(binary(t), "key", "set-rate-limit", churnID, strconv.Itoa(100+i%2))
		cmd.Env = append(os.Environ(), "AGENTAPI_DB="+db)
		out, err := cmd.CombinedOutput()
		l.mu.Lock()
		l.cliRuns++
		if err != nil {
			l.cliFails = append(l.cliFails, fmt.Sprintf("%v: %s", err, out))
		}
		l.mu.Unlock()
	}
}

// readMe reads /v1/me until stop is closed.
func (l *shmTally) readMe(c *shmClient, stop <-chan struct{}) {
	for !stopped(stop) {
		code, body, err := c.do("GET", "/v1/me", "")
		l.mu.Lock()
		switch {
		case err != nil:
			l.failed = append(l.failed, "GET /v1/me: "+err.Error())
		case code != 200:
			l.failed = append(l.failed, fmt.Sprintf("GET /v1/me: %d %s", code, body))
		default:
			l.reads++
		}
		l.mu.Unlock()
	}
}

// createAgents creates agents shm-w-0, shm-w-1, … until stop is closed.
func (l *shmTally) createAgents(c *shmClient, w int, stop <-chan struct{}) {
	for i := 0; !stopped(stop); i++ {
		name := fmt.Sprintf("shm-%d-%d", w, i)
		code, body, err := c.do("POST", "/v1/ai-agents", fmt.Sprintf(`{"name":%q}`, name))
		l.recordCreate(name, code, body, err)
	}
}

func (l *shmTally) recordCreate(name string, code int, body []byte, err error) {
	var created struct {
		Data struct{ ID string } `json:"data"`
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		l.refused[name] = err.Error()
		l.failed = append(l.failed, "POST /v1/ai-agents: "+err.Error())
	case code == 201 && json.Unmarshal(body, &created) == nil && created.Data.ID != "":
		l.acked[created.Data.ID] = name
	default:
		l.refused[name] = fmt.Sprintf("%d %s", code, body)
		if code >= 500 {
			l.failed = append(l.failed, fmt.Sprintf("POST /v1/ai-agents: %d %s", code, body))
		}
	}
}

// shmCheckTally: no request went wrong, no CLI run failed, and enough
// happened to tell.
func shmCheckTally(t *testing.T, l *shmTally) {
	t.Helper()
	if len(l.failed) > 0 {
		t.Errorf("%d requests went wrong while the CLI wrote (no answer, 5xx, or a read not 200); first: %s", len(l.failed), l.failed[0])
	}
	if len(l.cliFails) > 0 {
		t.Errorf("%d of %d CLI runs failed; first: %s", len(l.cliFails), l.cliRuns, l.cliFails[0])
	}
	if l.cliRuns < 2 || l.reads == 0 || len(l.acked) == 0 {
		t.Fatalf("too little happened to tell: %d CLI runs, %d reads, %d creates", l.cliRuns, l.reads, len(l.acked))
	}
}

// shmListAgents reads every page of /v1/ai-agents: id → name.
func shmListAgents(t *testing.T, c *shmClient) map[string]string {
	t.Helper()
	listed := map[string]string{}
	for next := ""; ; {
		path := "/v1/ai-agents?limit=100"
		if next != "" {
			path += "&next=" + url.QueryEscape(next)
		}
		code, body, err := c.do("GET", path, "")
		if err != nil || code != 200 {
			t.Fatalf("GET %s: %d %v %s", path, code, err, body)
		}
		var page struct {
			Data []struct{ ID, Name string }
			Meta struct {
				Next    *string
				HasMore bool `json:"has_more"`
			}
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		for _, a := range page.Data {
			listed[a.ID] = a.Name
		}
		if !page.Meta.HasMore || page.Meta.Next == nil {
			break
		}
		next = *page.Meta.Next
	}
	return listed
}

// shmCheckListed: every acknowledged create is listed, and no refused one.
func shmCheckListed(t *testing.T, l *shmTally, listed map[string]string) {
	t.Helper()
	for id, name := range l.acked {
		if listed[id] != name {
			t.Errorf("agent %s (%s) was answered 201 but is not listed", id, name)
		}
	}
	byName := map[string]bool{}
	for _, name := range listed {
		byName[name] = true
	}
	for name, answer := range l.refused {
		if byName[name] {
			t.Errorf("create %s was answered %s, yet it was saved", name, answer)
		}
	}
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
