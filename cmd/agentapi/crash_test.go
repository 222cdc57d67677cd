package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// burst creates agents from 16 writers until stop is closed, and returns
// the ids the server acknowledged with 201 and how many requests failed
// without an answer.
func burst(t *testing.T, base, key, prefix string, stop <-chan struct{}, acked chan<- string) (failed int) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", base+"/v1/ai-agents", strings.NewReader(fmt.Sprintf(`{"name":"%s-%d-%d"}`, prefix, w, i)))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
					time.Sleep(5 * time.Millisecond)
					continue
				}
				var body struct {
					Data struct{ ID string } `json:"data"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&body)
				resp.Body.Close()
				if resp.StatusCode == 201 {
					acked <- body.Data.ID
				} else if resp.StatusCode >= 500 {
					t.Errorf("status %d during the burst", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	return failed
}

func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts servers")
	}
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			crashSafetyUnder(t, sig)
		})
	}
}

// crashSafetyUnder stops serve with sig in the middle of a burst of
// creates, and checks that every acknowledged create survived and the
// file is sound.
func crashSafetyUnder(t *testing.T, sig syscall.Signal) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "crash.db")
	acct := mustCLI(t, db, "", "account", "create", "--name", "Crash")
	mustCLI(t, db, "long enough password\n", "user", "create", "--account", acct, "--email", "c@example.com", "--role", "owner")
	key := mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "c@example.com", "--name", "k", "--preset", "full-access", "--rate-limit", "1000000")
	s := startServer(t, nil, "--db", db)

	acked, failed := crashSafetySignalDuringBurst(t, s, key, sig)

	// Every acknowledged create survived, and the file is sound.
	s2 := startServer(t, nil, "--db", db)
	var ids []string
	for id := range acked {
		ids = append(ids, id)
	}
	for _, id := range ids {
		if code, body, _ := call(t, "GET", s2.base+"/v1/ai-agents/"+id, key, ""); code != 200 {
			t.Fatalf("acknowledged agent %s lost after %s: %d %v", id, sig, code, body)
		}
	}
	stored := crashSafetyCheckFile(t, db, ids, sig)
	t.Logf("%s: %d acknowledged, %d stored, %d requests without an answer", sig, len(ids), stored, failed)
}

// crashSafetySignalDuringBurst runs burst against s, sends sig once 300
// creates were acknowledged, and stops the burst 100 ms after serve
// exited. It returns the acknowledged ids (the channel closed) and how
// many requests got no answer; after SIGTERM serve must exit cleanly.
func crashSafetySignalDuringBurst(t *testing.T, s *server, key string, sig syscall.Signal) (acked chan string, failed int) {
	t.Helper()
	acked = make(chan string, 100000)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { failed = burst(t, s.base, key, "crash", stop, acked); close(done) }()
	for len(acked) < 300 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	exit := <-s.done
	s.done <- exit
	time.Sleep(100 * time.Millisecond)
	close(stop)
	<-done
	close(acked)
	if sig == syscall.SIGTERM && exit != nil {
		t.Fatalf("exit after SIGTERM: %v", exit)
	}
	return acked, failed
}

// crashSafetyCheckFile: db passes integrity_check and stores at least the
// acknowledged agents (after SIGTERM, exactly those). It returns how many
// agents are stored.
func crashSafetyCheckFile(t *testing.T, db string, ids []string, sig syscall.Signal) int {
	t.Helper()
	conn := openIntact(t, db)
	var stored int
	if err := conn.QueryRow("SELECT count(*) FROM agents").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored < len(ids) {
		t.Fatalf("%d agents stored, %d acknowledged", stored, len(ids))
	}
	if sig == syscall.SIGTERM && stored != len(ids) {
		// A graceful stop finishes what it started: nothing is half done.
		t.Fatalf("SIGTERM: %d stored but %d acknowledged", stored, len(ids))
	}
	return stored
}

// openIntact opens the SQLite file db, closed when the test ends, and
// fails the test unless SQLite's integrity_check finds it intact.
func openIntact(t *testing.T, db string) *sql.DB {
	t.Helper()
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var check string
	if err := conn.QueryRowContext(context.Background(), "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check: %q %v", check, err)
	}
	return conn
}
