package main

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{1 * mib, 32 * mib, 3200},  // goal 1 + 32 MiB
		{4 * mib, 32 * mib, 800},   // goal 4 + 32 MiB
		{32 * mib, 32 * mib, 100},  // the default from here on
		{100 * mib, 32 * mib, 100}, // goal 2 × live, as without the tuner
		{0, 32 * mib, 100_000},     // capped
		{3 * mib, 32 * mib, 1067},  // rounded up: never less headroom than asked
	} {
		if got := gcPercentFor(c.live, c.headroom); got != c.want {
			t.Errorf("gcPercentFor(%d MiB, %d MiB) = %d, want %d", c.live/mib, c.headroom/mib, got, c.want)
		}
	}
}

func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// waitGOGC collects until GOGC satisfies ok: the tuner runs after each
// collection, on the cleanup goroutine.
func waitGOGC(t *testing.T, what string, ok func(uint64) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(gogc()) {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC is %d, want %s", gogc(), what)
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}

func TestGCHeadroomFollowsTheLiveHeap(t *testing.T) {
	before := gogc()
	stop := startGCHeadroom(256 << 20)
	// A test binary's live heap is a few MiB: far under the headroom.
	waitGOGC(t, "well above 100 with a small live heap", func(p uint64) bool { return p >= 1000 })

	// A live heap larger than the headroom: back to GOGC=100.
	big := make([]*[1 << 20]byte, 300)
	for i := range big {
		big[i] = new([1 << 20]byte)
	}
	waitGOGC(t, "100 with a live heap over the headroom", func(p uint64) bool { return p == 100 })
	runtime.KeepAlive(big)
	big = nil
	waitGOGC(t, "high again once the heap is freed", func(p uint64) bool { return p >= 1000 })

	// A second user shares the tuner; only the last stop restores GOGC.
	stop2 := startGCHeadroom(256 << 20)
	stop()
	stop() // twice is once
	if p := gogc(); p == before {
		t.Fatalf("GOGC restored to %d while a user remains", p)
	}
	stop2()
	if p := gogc(); p != before {
		t.Fatalf("GOGC is %d after the last stop, want %d as before", p, before)
	}
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	if p := gogc(); p != before {
		t.Fatalf("GOGC changed to %d after the stop", p)
	}
}

// TestServeRejectsBadNumbersInTheEnvironment: a bad AGENTAPI_* number is a
// usage error (exit 2) naming the variable, before anything starts.
func TestServeRejectsBadNumbersInTheEnvironment(t *testing.T) {
	for _, c := range []struct{ name, value, want string }{
		{"AGENTAPI_GC_HEADROOM_MIB", "-1", "AGENTAPI_GC_HEADROOM_MIB must be a whole number of MiB (0 turns it off)"},
		{"AGENTAPI_GC_HEADROOM_MIB", "lots", "AGENTAPI_GC_HEADROOM_MIB must be a whole number of MiB"},
		{"AGENTAPI_UNAUTH_RATE_LIMIT", "0", "AGENTAPI_UNAUTH_RATE_LIMIT must be a positive whole number"},
		{"AGENTAPI_TRUSTED_PROXIES", "10.0.0.0/8, example.com", `--trusted-proxies: trusted proxy "example.com" is not an IP address or CIDR prefix`},
	} {
		var out, errb bytes.Buffer
		getenv := func(k string) string {
			switch k {
			case c.name:
				return c.value
			case "AGENTAPI_DB":
				return filepath.Join(t.TempDir(), "never.db")
			}
			return ""
		}
		code := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0"}, getenv, strings.NewReader(""), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%s=%s: exit %d, stderr %q; want 2 and %q", c.name, c.value, code, errb.String(), c.want)
		}
	}
	// 0 turns the headroom off and is accepted (checked by the flag's parse only).
	if n, err := envInt(env{getenv: func(string) string { return "0" }}, "AGENTAPI_GC_HEADROOM_MIB", 32, 0, "x"); err != nil || n != 0 {
		t.Fatalf("0: %d %v", n, err)
	}
}

// gcSink keeps each op's garbage reachable until the next op, as a
// request's allocations are until it is answered.
var gcSink [][]byte

// BenchmarkGCHeadroom is what the tuner is for: a small live heap (2 MiB,
// serve's is a few) and a request's worth of garbage per op (31
// allocations, about 2.9 KB: BenchmarkHandlerMe's GET /v1/me), with the
// runtime's default GOGC and with serve's default headroom. It reports the
// collector's CPU per op and its cycles per thousand ops, figures that do
// not depend on how busy the machine is.
func BenchmarkGCHeadroom(b *testing.B) {
	live := make([][]byte, 2<<10)
	for i := range live {
		live[i] = make([]byte, 1<<10)
	}
	for _, c := range []struct {
		name     string
		headroom uint64
	}{{"runtime default", 0}, {"headroom 32 MiB", defaultGCHeadroomMiB << 20}} {
		b.Run(c.name, func(b *testing.B) {
			prev := debug.SetGCPercent(100)
			defer debug.SetGCPercent(prev)
			if c.headroom > 0 {
				defer startGCHeadroom(c.headroom)()
			}
			runtime.GC()
			s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"}}
			metrics.Read(s)
			cpu0, cycles0 := s[0].Value.Float64(), s[1].Value.Uint64()
			b.ReportAllocs()
			for b.Loop() {
				req := make([][]byte, 0, 31)
				for j := range 31 {
					req = append(req, make([]byte, 48+(j%4)*16))
				}
				gcSink = req
			}
			metrics.Read(s)
			b.ReportMetric((s[0].Value.Float64()-cpu0)*1e9/float64(b.N), "gc-cpu-ns/op")
			b.ReportMetric(float64(s[1].Value.Uint64()-cycles0)*1000/float64(b.N), "gc-cycles/kop")
		})
	}
	runtime.KeepAlive(live)
}
