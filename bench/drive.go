package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// target is one request, sent again and again.
type target struct {
	url    string
	header http.Header // read only: shared by every request
}

func newClient(conns int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
		IdleConnTimeout: time.Minute, DisableCompression: true,
	}}
}

// drive sends t from conns connections at once, back to back, for d, and
// returns how many were answered; an answer other than 200 is an error.
func drive(ctx context.Context, client *http.Client, conns int, d time.Duration, t target) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var n atomic.Int64
	errs := make([]error, conns)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := get(ctx, client, t); err != nil {
					if ctx.Err() == nil {
						errs[i] = err
					}
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return int(n.Load()), errors.Join(errs...)
}

// get sends t once and returns the body of its answer, which must be 200.
func get(ctx context.Context, client *http.Client, t target) ([]byte, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	req.Header = t.header
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %.200s", t.url, resp.StatusCode, body)
	}
	return body, nil
}

// deferredEvery is how often serve writes what requests left behind
// (last_used_at, usage counts and request logs: internal/usage). A
// scenario's part of a round ends that long after its last request, so
// that this work is counted as its own, not as whatever runs next.
const deferredEvery = time.Second

// tally is what one scenario (or the floor) cost over the rounds.
type tally struct {
	n      int
	cost   cost
	rounds []float64 // the total CPU µs a request of each round
}

func (t *tally) add(n int, c cost) {
	t.n += n
	t.cost = cost{t.cost.serve + c.serve, t.cost.pg + c.pg, t.cost.redis + c.redis}
	if n > 0 {
		t.rounds = append(t.rounds, float64(c.total().Nanoseconds())/1e3/float64(n))
	}
}

// perReq is the CPU time a request of each process.
func (t tally) perReq() cost {
	if t.n == 0 {
		return cost{}
	}
	n := time.Duration(t.n)
	return cost{t.cost.serve / n, t.cost.pg / n, t.cost.redis / n}
}

// probe is one scenario as measured: its request, and the process (with
// what stands behind it) that answers it.
type probe struct {
	target target
	meter  meter
}

// measure drives t for d and reads the CPU its processes spent, including
// the deferred work of its requests.
func measure(ctx context.Context, c config, client *http.Client, k probe) (int, cost, error) {
	before, err := k.meter.read(ctx)
	if err != nil {
		return 0, cost{}, err
	}
	n, err := drive(ctx, client, c.conns, c.duration, k.target)
	if err != nil {
		return n, cost{}, err
	}
	time.Sleep(deferredEvery + 200*time.Millisecond)
	after, err := k.meter.read(ctx)
	return n, after.since(before), err
}

// rounds measures the cases, the first of which is the floor, in rounds:
// each round the floor first, then the others, starting each round at the
// next. A second of each, unmeasured, goes first: connections made, caches
// and pools warm, the heap grown to its working size.
func rounds(ctx context.Context, c config, cases []probe) ([]tally, error) {
	client := newClient(c.conns)
	defer client.CloseIdleConnections()
	for _, k := range cases {
		if _, err := drive(ctx, client, c.conns, time.Second, k.target); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	time.Sleep(deferredEvery + 200*time.Millisecond)
	out := make([]tally, len(cases))
	rest := len(cases) - 1
	for r := range c.rounds {
		order := []int{0}
		for k := range rest {
			order = append(order, 1+(r+k)%rest)
		}
		for _, i := range order {
			n, cst, err := measure(ctx, c, client, cases[i])
			if err != nil {
				return nil, err
			}
			out[i].add(n, cst)
		}
	}
	return out, nil
}
