// Package bodybudget bounds the memory of request bodies an instance holds
// at once: the /v1 API's JSON bodies and the console's forms share one
// Budget (serve --max-body-memory; docs/api.md, Limits).
//
// A body reserves memory as its bytes arrive, not what its Content-Length
// declares: a sender that stalls holds only the buffer its bytes fill (at
// most twice what it has sent, or FirstStep, until it has sent
// DeclaredStep: Hold.Read). And no owner, an account or
// a client address without one, may hold more than its share of the
// Budget (Share), so one tenant's slow bodies cannot leave another none.
package bodybudget

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// Refusals of Hold.Grow (and Read): the Budget stayed full, or the owner
// stayed at its share, for the whole wait.
var (
	ErrBusy  = errors.New("bodybudget: the memory for request bodies stayed full")
	ErrShare = errors.New("bodybudget: the owner holds its share of the memory for request bodies")
)

const (
	// DefaultTotal is serve --max-body-memory's default.
	DefaultTotal = 256 << 20
	// ShareDivisor: an owner holds at most 1/ShareDivisor of the Budget…
	ShareDivisor = 8
	// MinShare: …and never less than this (or the whole Budget, when it is
	// smaller), so that one owner can always read a 1 MiB body growing.
	MinShare = 2 << 20
	// FirstStep is the first reservation of a body of unknown or larger
	// length: what a sender holds before it has sent anything.
	FirstStep = 4 << 10
	// DeclaredStep: a body of declared length whose buffer (doubling from
	// FirstStep) has filled this much grows at once to that length.
	DeclaredStep = 32 << 10
	// DefaultWait is how long a reservation waits for room.
	DefaultWait = 2 * time.Second
)

// Budget counts the bytes reserved by request bodies, in total and per
// owner. Its zero value is not usable; make one with New.
type Budget struct {
	total, share int64
	wait         time.Duration

	mu      sync.Mutex
	used    int64
	owners  map[string]int64
	waiting int           // Grow calls waiting for room
	freed   chan struct{} // closed (and replaced) when bytes are released and someone waits
}

// New returns a Budget of total bytes, each owner's share
// max(total/ShareDivisor, MinShare) but at most total; a reservation waits
// up to wait for room (DefaultWait when zero).
func New(total int64, wait time.Duration) *Budget {
	if wait <= 0 {
		wait = DefaultWait
	}
	return &Budget{
		total: total, share: min(total, max(total/ShareDivisor, MinShare)), wait: wait,
		owners: make(map[string]int64), freed: make(chan struct{}),
	}
}

// Share is the most one owner may hold.
func (b *Budget) Share() int64 { return b.share }

// Used is the bytes reserved now, in total and by owner.
func (b *Budget) Used(owner string) (total, byOwner int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.owners[owner]
}

// Hold starts a reservation of owner's, of nothing yet: one request's
// body. Release it when the request is done with what it read.
func (b *Budget) Hold(owner string) *Hold { return &Hold{b: b, owner: owner} }

// Hold is one request's reservation. It is not safe for concurrent use.
type Hold struct {
	b     *Budget
	owner string
	n     int64
}

// Held is the bytes the Hold has reserved.
func (h *Hold) Held() int64 { return h.n }

// Grow adds n bytes to the reservation, waiting up to the Budget's wait
// (or until ctx ends) for room: ErrShare when it was the owner's share
// that stayed full, else ErrBusy.
func (h *Hold) Grow(ctx context.Context, n int64) error {
	b := h.b
	var timeout <-chan time.Time
	for {
		b.mu.Lock()
		err := b.take(h.owner, n)
		if err == nil {
			b.mu.Unlock()
			h.n += n
			return nil
		}
		freed := b.freed
		b.waiting++
		b.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(b.wait)
			defer t.Stop()
			timeout = t.C
		}
		var done bool
		select {
		case <-freed:
		case <-timeout:
			done = true
		case <-ctx.Done():
			done = true
		}
		b.mu.Lock()
		b.waiting--
		b.mu.Unlock()
		if done {
			return err
		}
	}
}

// take reserves n bytes for owner if they fit; b.mu is held. A budget
// without room is ErrBusy whatever the owner holds.
func (b *Budget) take(owner string, n int64) error {
	switch {
	case b.used+n > b.total:
		return ErrBusy
	case b.owners[owner]+n > b.share:
		return ErrShare
	}
	b.owners[owner] += n
	b.used += n
	return nil
}

// Shrink gives n of the reservation's bytes back (at most what it holds).
func (h *Hold) Shrink(n int64) {
	n = min(n, h.n)
	if n <= 0 {
		return
	}
	h.n -= n
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.owners[h.owner] -= n; b.owners[h.owner] <= 0 {
		delete(b.owners, h.owner)
	}
	if b.waiting > 0 {
		close(b.freed)
		b.freed = make(chan struct{})
	}
}

// Release gives the whole reservation back; the Hold may grow again.
func (h *Hold) Release() { h.Shrink(h.n) }

// Read reads r to its end into one buffer under the reservation, which
// grows as the bytes arrive: the buffer starts at declared+1 bytes when
// the length is declared (declared >= 0) and under FirstStep, else at
// FirstStep, and doubles when full, up to limit+1; a declared length's
// buffer, once DeclaredStep has filled, grows at once to declared+1. So
// a sender holds at most twice what it has sent, up to DeclaredStep, and
// its declared length once it has sent that much; and the buffers made
// for a declared length come to at most 2*DeclaredStep beyond it. Each
// growth is reserved before the new buffer is made and the old one's
// bytes given back after the copy, so the reservation is never less than
// the buffers held. r should stop at limit (http.MaxBytesReader); Read
// does not grow past limit+1. A refusal of Grow is returned with the bytes
// read so far.
func (h *Hold) Read(ctx context.Context, r io.Reader, declared, limit int64) ([]byte, error) {
	bound := limit + 1
	if declared >= 0 && declared < limit {
		bound = declared + 1 // + 1: room to find the end without growing
	}
	size := min(bound, FirstStep)
	if err := h.Grow(ctx, size); err != nil {
		return nil, err
	}
	b := make([]byte, 0, size)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) < cap(b) {
			continue
		}
		next := min(2*int64(cap(b)), limit+1)
		if int64(cap(b)) < bound {
			next = min(next, bound)
			if declared >= 0 && next > DeclaredStep {
				// Past DeclaredStep a declared length is trusted: one last
				// buffer, so that the steps cost at most DeclaredStep*2
				// beyond the body, not the body again.
				next = bound
			}
		}
		if next <= int64(cap(b)) {
			return b, errors.New("bodybudget: the reader went past its limit")
		}
		if err := h.Grow(ctx, next); err != nil {
			return b, err
		}
		grown := make([]byte, len(b), next)
		copy(grown, b)
		h.Shrink(int64(cap(b)))
		b = grown
	}
}
