package main

import (
	"bufio"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// hostileBody is just under 1 MiB of JSON: a name and about 90,000
// attributes the contract does not know, the shape that cost several MiB
// to decode before issue 28.
func hostileBody() string {
	var b strings.Builder
	b.WriteString(`{"name":"x"`)
	for i := 0; b.Len() < 1<<20-64; i++ {
		b.WriteString(`,"a` + strconv.Itoa(i) + `":0`)
	}
	b.WriteString("}")
	return b.String()
}

// memKiB reads one of the process's memory figures from /proc (VmRSS, or
// VmHWM: the most it has held).
func memKiB(t *testing.T, pid int, field string) int {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestHostileBodiesBoundRSS: 150 concurrent 1 MiB bodies of unknown
// attributes sent to the built binary each get 400 invalid_field, and the
// process's resident memory grows by less than 2 MiB a request, bodies
// included (issue 28: 300 at once took RSS to 1.1 GiB).
func TestHostileBodiesBoundRSS(t *testing.T) {
	if raceEnabled() {
		t.Skip("the race detector's shadow memory makes RSS meaningless; run without -race")
	}
	db := filepath.Join(t.TempDir(), "hostile.db")
	acct := mustCLI(t, db, "", "account", "create", "--name", "Hostile")
	mustCLI(t, db, "a long passphrase\n", "user", "create", "--account", acct, "--email", "owner@example.com", "--role", "owner")
	key := strings.TrimSpace(mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "owner@example.com",
		"--name", "k", "--preset", "full-access", "--rate-limit", "100000"))
	// A body budget whose account share (an eighth) holds all 150 bodies
	// at once: decoding at that concurrency is what is measured.
	s := startServer(t, nil, "--db", db, "--max-body-memory", "2048")
	pid := s.cmd.Process.Pid
	if code, _, _ := call(t, "GET", s.base+"/v1/me", key, ""); code != 200 {
		t.Fatalf("GET /me: %d", code)
	}
	before := memKiB(t, pid, "VmRSS")
	body := hostileBody()
	const n = 150
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", s.base+"/v1/ai-agents", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusBadRequest {
			t.Fatalf("request %d: %d, want 400 invalid_field", i, c)
		}
	}
	peak := memKiB(t, pid, "VmHWM")
	grew := peak - before
	t.Logf("RSS %d KiB before, peak %d KiB: +%d KiB for %d bodies of %d KiB", before, peak, grew, n, len(body)>>10)
	if grew > n*2048 {
		t.Fatalf("RSS grew %d KiB for %d hostile bodies, over 2 MiB a request", grew, n)
	}
}
