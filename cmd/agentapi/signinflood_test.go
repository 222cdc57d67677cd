package main

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// signInFloodBody is a sign-in form of about 259 KB: 9,990 fields besides
// a token, an email and a password, the shape of issue 40's finding.
func signInFloodBody() string {
	var b strings.Builder
	b.WriteString("csrf=x&email=nobody%40example.com&password=wrong+password")
	for i := 0; i < 9990; i++ {
		b.WriteString("&f" + strconv.Itoa(i) + "=" + strings.Repeat("x", 19))
	}
	return b.String()
}

// fromAddr is a client whose connections come from the loopback address
// 127.0.0.n, so that one test is many client addresses.
func fromAddr(n int) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(n))}}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DialContext: d.DialContext, MaxIdleConnsPerHost: 64,
	}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// TestSignInFloodBoundsRSS: 400 workers from 16 addresses post sign-in
// forms of 9,990 fields (259 KB, with a token and its cookie) for 4 s to
// the built binary. The form is read only after the address's throttle,
// and only within 8 KiB, so the process's resident memory grows by less
// than 96 MiB. Before, each was parsed into two maps before the throttle
// and held while it waited for a password-hashing slot: RSS grew about
// 1 GiB (issue 40).
func TestSignInFloodBoundsRSS(t *testing.T) {
	if raceEnabled() {
		t.Skip("the race detector's shadow memory makes RSS meaningless; run without -race")
	}
	s := startServer(t, nil, "--db", t.TempDir()+"/flood.db")
	pid := s.cmd.Process.Pid
	before := memKiB(t, pid, "VmRSS")
	body := signInFloodBody()
	const workers, addrs = 400, 16
	clients := make([]*http.Client, addrs)
	for i := range clients {
		clients[i] = fromAddr(i + 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	var sent, failed atomic.Int64
	statuses := sync.Map{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				code := signInFloodPost(s.base, clients[w%addrs], body)
				sent.Add(1)
				if code == 0 {
					failed.Add(1)
					continue
				}
				n, _ := statuses.LoadOrStore(code, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}
		})
	}
	wg.Wait()
	peak := memKiB(t, pid, "VmHWM")
	var seen []string
	statuses.Range(func(k, v any) bool {
		seen = append(seen, strconv.Itoa(k.(int))+"×"+strconv.FormatInt(v.(*atomic.Int64).Load(), 10))
		return true
	})
	grew := peak - before
	t.Logf("%d sign-in posts of %d bytes (%d without an answer), answers %v: RSS %d KiB before, peak %d KiB (+%d KiB)",
		sent.Load(), len(body), failed.Load(), seen, before, peak, grew)
	if grew > 96<<10 {
		t.Fatalf("RSS grew %d KiB under a flood of large sign-in forms, over 96 MiB", grew)
	}
	if code, _, _ := call(t, "GET", s.base+"/healthz", "", ""); code != http.StatusOK {
		t.Fatalf("after the flood: /healthz %d", code)
	}
}

// signInFloodPost posts body as a sign-in form with the token cookie, and
// returns the status (0: no answer).
func signInFloodPost(base string, c *http.Client, body string) int {
	req, _ := http.NewRequest(http.MethodPost, base+"/console/signin", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Cookie", "agentapi_signin=x")
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
