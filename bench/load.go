package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// request is one HTTP call of a scenario; next makes the i-th request of
// worker w, so writers can send distinct bodies.
type request func(w, i int) (*http.Request, error)

// result is what one measured phase produced.
type result struct {
	n        int
	elapsed  time.Duration
	lat      []time.Duration
	statuses map[int]int
	srvCPU   time.Duration   // CPU the server process spent during the phase (when known)
	genCPU   time.Duration   // CPU this process (the load generator) spent during it
	backCPU  []time.Duration // CPU of the servers behind it, by name (servers), when local
}

// cpuPerReq is the server's and the generator's CPU time per request.
func (r result) cpuPerReq() (srv, gen time.Duration) {
	if r.n == 0 {
		return 0, 0
	}
	return r.srvCPU / time.Duration(r.n), r.genCPU / time.Duration(r.n)
}

// backPerReq is the CPU time per request of each server behind the service.
func (r result) backPerReq() []time.Duration {
	out := make([]time.Duration, len(r.backCPU))
	for i, d := range r.backCPU {
		if r.n > 0 {
			out[i] = d / time.Duration(r.n)
		}
	}
	return out
}

func (r result) rps() float64 { return float64(r.n) / r.elapsed.Seconds() }

func (r result) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[min(len(r.lat)-1, int(float64(len(r.lat))*p))]
}

func (r *result) merge(o result) {
	r.n += o.n
	r.elapsed += o.elapsed
	r.srvCPU += o.srvCPU
	r.genCPU += o.genCPU
	for i, d := range o.backCPU {
		if i == len(r.backCPU) {
			r.backCPU = append(r.backCPU, 0)
		}
		r.backCPU[i] += d
	}
	r.lat = append(r.lat, o.lat...)
	if r.statuses == nil {
		r.statuses = map[int]int{}
	}
	for k, v := range o.statuses {
		r.statuses[k] += v
	}
}

func (r *result) sort() { slices.Sort(r.lat) }

func newClient(conns int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns: conns * 2, MaxIdleConnsPerHost: conns * 2, MaxConnsPerHost: conns,
			IdleConnTimeout: time.Minute, DisableCompression: true,
		},
	}
}

// drive runs conns workers for d, each issuing requests back to back.
func drive(ctx context.Context, client *http.Client, conns int, d time.Duration, mk request) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu     sync.Mutex
		out    = result{statuses: map[int]int{}}
		firstE error
		wg     sync.WaitGroup
	)
	start := time.Now()
	for w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 4096)
			st := map[int]int{}
			for i := 0; ctx.Err() == nil; i++ {
				req, err := mk(w, i)
				if err != nil {
					mu.Lock()
					firstE = err
					mu.Unlock()
					return
				}
				t0 := time.Now()
				resp, err := client.Do(req.WithContext(ctx))
				if err != nil {
					if ctx.Err() != nil {
						break
					}
					mu.Lock()
					firstE = err
					mu.Unlock()
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat = append(lat, time.Since(t0))
				st[resp.StatusCode]++
			}
			mu.Lock()
			out.lat = append(out.lat, lat...)
			for k, v := range st {
				out.statuses[k] += v
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	out.elapsed = time.Since(start)
	out.n = len(out.lat)
	out.sort()
	return out, firstE
}

// measured runs drive and records the CPU time the server process p and
// this process spent meanwhile.
func measured(ctx context.Context, p *proc, back *servers, client *http.Client, conns int, d time.Duration, mk request) (result, error) {
	s0, g0, b0 := p.cpu(), selfCPU(), back.snapshot()
	r, err := drive(ctx, client, conns, d, mk)
	r.srvCPU, r.genCPU, r.backCPU = p.cpu()-s0, selfCPU()-g0, back.since(b0)
	return r, err
}

// deferredEvery is how often the service writes what requests left
// behind (last_used_at, usage and request logs: internal/usage).
const deferredEvery = time.Second

// settle waits, after a service round, for the work the service deferred
// to run (up to deferredEvery later, then until the service is idle for
// 100 ms, at most 2 s more), and adds the CPU it took, the service's and
// its servers', to r. That work is the service's cost: left to run during
// the next floor round, it slowed the floor and flattered the ratio (with
// usage recording on, SQLite /me read 0.77 against a floor of 39k requests
// a second, and 0.58 with it off against 59k, in one session), and its CPU
// was missing from the service's CPU per request.
func settle(p *proc, back *servers, r *result) {
	s0, b0 := p.cpu(), back.snapshot()
	time.Sleep(deferredEvery + 100*time.Millisecond)
	for range 20 {
		c := p.cpu()
		time.Sleep(100 * time.Millisecond)
		if p.cpu()-c <= time.Millisecond {
			break
		}
	}
	r.srvCPU += p.cpu() - s0
	for i, d := range back.since(b0) {
		if i < len(r.backCPU) {
			r.backCPU[i] += d
		}
	}
}

// abRounds alternates floor and service: A B A B, merging each side.
// When prof is set, the first service half is profiled.
func abRounds(ctx context.Context, c config, client *http.Client, floorP, svcP *proc, floor, svc request, prof *profiler) (result, result, error) {
	a, bs, err := interleaved(ctx, c, client, floorP, floor, []*proc{svcP}, []request{svc}, prof)
	if err != nil {
		return a, result{}, err
	}
	return a, bs[0], nil
}

// interleaved measures the floor and each service in rounds: the floor,
// then the services, starting each round from the next one, so that the
// machine's drift and bursts fall on all of them alike. Each side's rounds
// are merged. When prof is set, the first service's first half is
// profiled.
func interleaved(ctx context.Context, c config, client *http.Client, floorP *proc, floor request, svcPs []*proc, svcs []request, prof *profiler) (result, []result, error) {
	var a result
	bs := make([]result, len(svcs))
	// A second of each, unmeasured: connections made, caches and pools
	// warm, the runtime's heap grown to its working size.
	for _, mk := range append([]request{floor}, svcs...) {
		if _, err := drive(ctx, client, c.conns, time.Second, mk); err != nil {
			return a, bs, fmt.Errorf("warm-up: %w", err)
		}
	}
	for _, p := range svcPs {
		settle(p, c.back, &result{})
	}
	for round := range c.rounds {
		ra, err := measured(ctx, floorP, nil, client, c.conns, c.duration, floor)
		if err != nil {
			return a, bs, fmt.Errorf("floor: %w", err)
		}
		a.merge(ra)
		for k := range svcs {
			i := (round + k) % len(svcs)
			var rb result
			measure := func() (err error) {
				rb, err = measured(ctx, svcPs[i], c.back, client, c.conns, c.duration, svcs[i])
				if err == nil {
					settle(svcPs[i], c.back, &rb)
				}
				return err
			}
			if i == 0 {
				err = prof.during(measure)
			} else {
				err = measure()
			}
			if err != nil {
				return a, bs, fmt.Errorf("service: %w", err)
			}
			bs[i].merge(rb)
		}
	}
	a.sort()
	for i := range bs {
		bs[i].sort()
		if bad := non2xx(bs[i].statuses); bad != "" {
			return a, bs, fmt.Errorf("service answered %s", bad)
		}
	}
	return a, bs, nil
}

func non2xx(st map[int]int) string {
	var parts []string
	for code, n := range st {
		if code < 200 || code > 299 {
			parts = append(parts, fmt.Sprintf("%d×%d", n, code))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func get(url, key string) request {
	return func(int, int) (*http.Request, error) {
		req, err := http.NewRequest("GET", url, nil)
		if err == nil && key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		return req, err
	}
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d.Nanoseconds())/1000) }

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
