package password

import (
	"cmp"
	"context"
	"errors"
	"runtime"
	"time"
)

// DefaultWait is how long a hash or verification waits for a free slot.
const DefaultWait = 2 * time.Second

// ErrBusy is returned when every slot of a Gate stayed taken for its whole
// wait.
var ErrBusy = errors.New("password: too many password checks at once")

// Gate bounds how many hashes and verifications run at once. Each takes
// memoryKiB (19 MiB), so without a bound any number of concurrent sign-ins,
// with or without an account behind them, is that much memory each.
// Everything that hashes or verifies for a request goes through one Gate.
type Gate struct {
	slots chan struct{}
	wait  time.Duration
}

// NewGate lets n hashes run at once (2 × GOMAXPROCS when n ≤ 0); one
// beyond that waits at most wait (DefaultWait when ≤ 0) for a slot.
func NewGate(n int, wait time.Duration) *Gate {
	return &Gate{
		slots: make(chan struct{}, cmp.Or(max(n, 0), 2*runtime.GOMAXPROCS(0))),
		wait:  cmp.Or(max(wait, 0), DefaultWait),
	}
}

// Do runs fn in a slot. It returns ErrBusy if no slot freed within the
// wait, or ctx's error if ctx ended first; fn has not run then.
func (g *Gate) Do(ctx context.Context, fn func()) error {
	select {
	case g.slots <- struct{}{}:
	default:
		t := time.NewTimer(g.wait)
		defer t.Stop()
		select {
		case g.slots <- struct{}{}:
		case <-t.C:
			return ErrBusy
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() { <-g.slots }()
	fn()
	return nil
}

// Hash is the package's Hash in a slot.
func (g *Gate) Hash(ctx context.Context, pw string) (hash string, err error) {
	if gerr := g.Do(ctx, func() { hash, err = Hash(pw) }); gerr != nil {
		return "", gerr
	}
	return hash, err
}

// Verify is the package's Verify in a slot.
func (g *Gate) Verify(ctx context.Context, encoded, pw string) (ok bool, err error) {
	if gerr := g.Do(ctx, func() { ok, err = Verify(encoded, pw) }); gerr != nil {
		return false, gerr
	}
	return ok, err
}

// DummyVerify is the package's DummyVerify in a slot: an unknown email
// waits for a slot and costs one like a known one.
func (g *Gate) DummyVerify(ctx context.Context, pw string) error {
	return g.Do(ctx, func() { DummyVerify(pw) })
}
