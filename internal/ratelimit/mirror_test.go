package ratelimit

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentapi/agentapi/internal/testenv"
)

// newMirrored is a limiter whose script compares held epochs with a fresh
// mirror of its own.
func newMirrored(t *testing.T) (*Redis, *Mirror) {
	t.Helper()
	c := redisClient(t)
	m := NewMirror(c, MirrorKey([]byte(rand.Text())), nil)
	t.Cleanup(func() { c.Del(context.Background(), m.Key()) })
	l := newRedis(t, c, NewMemory(nil), nil)
	l.UseMirror(m)
	return l, m
}

func TestAllowAtDecidesOnlyUnderTheMirrorsEpoch(t *testing.T) {
	ctx := context.Background()
	l, m := newMirrored(t)
	key := uniqueKey()
	// No mirror: stale, nothing recorded.
	_, v, err := l.AllowAt(ctx, key, 2, 0, "")
	if err != nil || !v.Checked || v.Current || v.Mirror != -1 {
		t.Fatalf("no mirror: %+v, %v; want checked, stale, mirror -1", v, err)
	}
	if err := m.RaiseEpoch(ctx, 7); err != nil {
		t.Fatal(err)
	}
	for _, held := range []int64{6, 8} { // behind and ahead of the mirror
		if _, v, err := l.AllowAt(ctx, key, 2, held, ""); err != nil || v.Current || v.Mirror != 7 {
			t.Fatalf("held %d: %+v, %v; want stale with mirror 7", held, v, err)
		}
	}
	for i, want := range []bool{true, true, false} { // the stale calls counted nothing
		res, v, err := l.AllowAt(ctx, key, 2, 7, "")
		if err != nil || !v.Current || res.Allowed != want {
			t.Fatalf("call %d under the mirror: %+v %+v, %v; want current, allowed %v", i, res, v, err, want)
		}
	}
	// Allow (no epoch) ignores the mirror.
	if _, v, err := l.AllowAt(ctx, uniqueKey(), 1, -1, ""); err != nil || !v.Current {
		t.Fatalf("no epoch: %+v, %v", v, err)
	}
}

func TestMirrorOnlyMovesForwards(t *testing.T) {
	ctx := context.Background()
	_, m := newMirrored(t)
	for _, e := range []int64{3, 9, 5} {
		if err := m.RaiseEpoch(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if got, ok, err := m.Get(ctx); err != nil || !ok || got != 9 {
		t.Fatalf("mirror %d %v %v, want 9", got, ok, err)
	}
}

func TestMirrorRaiseFailureIsBoundedAndCounted(t *testing.T) {
	opts, err := ClientOptions("redis://" + testenv.SilentListener(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	m := NewMirror(c, MirrorKey([]byte("x")), nil)
	m.timeout = 300 * time.Millisecond
	start := time.Now()
	if err := m.RaiseEpoch(context.Background(), 1); err == nil {
		t.Fatal("raise on a Redis that does not answer: no error")
	}
	if d := time.Since(start); d > hangBound {
		t.Fatalf("raise took %v, want its bound", d)
	}
	if m.Failures() != 1 {
		t.Fatalf("failures %d, want 1", m.Failures())
	}
}

func TestMirrorRepairRaisesToTheStore(t *testing.T) {
	_, m := newMirrored(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Repair(ctx, func(context.Context) (int64, error) { return 42, nil })
	deadline := time.Now().Add(5 * StaleBound)
	for time.Now().Before(deadline) {
		if got, ok, _ := m.Get(ctx); ok && got == 42 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("repair did not raise the mirror")
}
