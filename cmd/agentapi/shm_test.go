package main

import (
	"context"
	"database/sql"
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
	run := 6 * time.Second
	if v := os.Getenv("AGENTAPI_SHM_TEST_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("AGENTAPI_SHM_TEST_SECONDS=%q: want a positive number of seconds", v)
		}
		run = time.Duration(n) * time.Second
	}
	db := filepath.Join(t.TempDir(), "shm.db")
	acct := mustCLI(t, db, "", "account", "create", "--name", "Shm")
	mustCLI(t, db, "long enough password\n", "user", "create", "--account", acct, "--email", "shm@example.com", "--role", "owner")
	key := mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "shm@example.com", "--name", "load",
		"--preset", "full-access", "--rate-limit", "1000000")
	var churn struct{ ID string }
	if err := json.Unmarshal([]byte(mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "shm@example.com",
		"--name", "churn", "--preset", "aiagent-read", "--json")), &churn); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, nil, "--db", db)

	client := &http.Client{Timeout: 30 * time.Second}
	do := func(method, path, body string) (int, []byte, error) {
		req, _ := http.NewRequest(method, s.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, b, err
	}

	var (
		mu       sync.Mutex
		failed   []string              // transport errors, 5xx, and reads not 200
		acked    = map[string]string{} // id → name, answered 201
		refused  = map[string]string{} // name → what came back instead
		reads    int
		cliRuns  int
		cliFails []string
	)
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
		for i := 0; i < 4 || time.Now().Before(deadline); i++ {
			cmd := exec.Command(binary(t), "key", "set-rate-limit", churn.ID, strconv.Itoa(100+i%2))
			cmd.Env = append(os.Environ(), "AGENTAPI_DB="+db)
			out, err := cmd.CombinedOutput()
			mu.Lock()
			cliRuns++
			if err != nil {
				cliFails = append(cliFails, fmt.Sprintf("%v: %s", err, out))
			}
			mu.Unlock()
		}
	}()
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stopped(stop) {
				code, body, err := do("GET", "/v1/me", "")
				mu.Lock()
				switch {
				case err != nil:
					failed = append(failed, "GET /v1/me: "+err.Error())
				case code != 200:
					failed = append(failed, fmt.Sprintf("GET /v1/me: %d %s", code, body))
				default:
					reads++
				}
				mu.Unlock()
			}
		}()
	}
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stopped(stop); i++ {
				name := fmt.Sprintf("shm-%d-%d", w, i)
				code, body, err := do("POST", "/v1/ai-agents", fmt.Sprintf(`{"name":%q}`, name))
				var created struct {
					Data struct{ ID string } `json:"data"`
				}
				mu.Lock()
				switch {
				case err != nil:
					refused[name] = err.Error()
					failed = append(failed, "POST /v1/ai-agents: "+err.Error())
				case code == 201 && json.Unmarshal(body, &created) == nil && created.Data.ID != "":
					acked[created.Data.ID] = name
				default:
					refused[name] = fmt.Sprintf("%d %s", code, body)
					if code >= 500 {
						failed = append(failed, fmt.Sprintf("POST /v1/ai-agents: %d %s", code, body))
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	if len(failed) > 0 {
		t.Errorf("%d requests went wrong while the CLI wrote (no answer, 5xx, or a read not 200); first: %s", len(failed), failed[0])
	}
	if len(cliFails) > 0 {
		t.Errorf("%d of %d CLI runs failed; first: %s", len(cliFails), cliRuns, cliFails[0])
	}
	if cliRuns < 2 || reads == 0 || len(acked) == 0 {
		t.Fatalf("too little happened to tell: %d CLI runs, %d reads, %d creates", cliRuns, reads, len(acked))
	}

	// The list, page by page, holds every acknowledged create and none of
	// the refused ones.
	listed := map[string]string{}
	for next := ""; ; {
		path := "/v1/ai-agents?limit=100"
		if next != "" {
			path += "&next=" + url.QueryEscape(next)
		}
		code, body, err := do("GET", path, "")
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
	for id, name := range acked {
		if listed[id] != name {
			t.Errorf("agent %s (%s) was answered 201 but is not listed", id, name)
		}
	}
	byName := map[string]bool{}
	for _, name := range listed {
		byName[name] = true
	}
	for name, answer := range refused {
		if byName[name] {
			t.Errorf("create %s was answered %s, yet it was saved", name, answer)
		}
	}

	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var check string
	if err := conn.QueryRowContext(context.Background(), "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check: %q %v", check, err)
	}
	t.Logf("%s: %d CLI writes, %d reads, %d creates acknowledged, %d refused", run, cliRuns, reads, len(acked), len(refused))
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
