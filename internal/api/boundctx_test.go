package api

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

type testKey struct{}

func TestBoundCtx(t *testing.T) {
	t.Run("values, deadline, no timer until asked", func(t *testing.T) {
		parent := context.WithValue(context.Background(), testKey{}, "p")
		rec := &recorder{id: "req_x"}
		dl := time.Now().Add(time.Hour)
		c := newBoundCtx(parent, rec, dl)
		defer c.stop()
		if c.Value(ctxLogAttrs) != rec || c.Value(testKey{}) != "p" || requestID(c) != "req_x" {
			t.Fatal("values not found")
		}
		if d, ok := c.Deadline(); !ok || !d.Equal(dl) {
			t.Fatalf("deadline %v %v", d, ok)
		}
		if c.armed.Load() != nil {
			t.Fatal("armed before anyone asked for Done or Err")
		}
		if c.Err() != nil {
			t.Fatal("Err before the deadline")
		}
		if c.Value(testKey{}) != "p" || c.Value(ctxLogAttrs) != rec {
			t.Fatal("values lost once armed")
		}
	})
	t.Run("deadline passes", func(t *testing.T) {
		c := newBoundCtx(context.Background(), &recorder{}, time.Now().Add(20*time.Millisecond))
		defer c.stop()
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("not done after the deadline")
		}
		if !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Fatalf("err %v", c.Err())
		}
	})
	t.Run("parent cancelled, and a child follows without a goroutine", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		c := newBoundCtx(parent, &recorder{}, time.Now().Add(time.Hour))
		defer c.stop()
		before := runtime.NumGoroutine()
		var children []context.CancelFunc
		var kids []context.Context
		for range 50 {
			k, kc := context.WithCancel(c)
			kids, children = append(kids, k), append(children, kc)
		}
		if n := runtime.NumGoroutine() - before; n > 5 {
			t.Fatalf("%d goroutines for 50 derived contexts", n)
		}
		cancel()
		for _, k := range kids {
			select {
			case <-k.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("a derived context missed the parent's cancellation")
			}
		}
		if !errors.Is(c.Err(), context.Canceled) {
			t.Fatalf("err %v", c.Err())
		}
		for _, kc := range children {
			kc()
		}
	})
	t.Run("stopped, armed or not", func(t *testing.T) {
		a := newBoundCtx(context.Background(), &recorder{}, time.Now().Add(time.Hour))
		_ = a.Done()
		a.stop()
		b := newBoundCtx(context.Background(), &recorder{}, time.Now().Add(time.Hour))
		b.stop()
		for _, c := range []*boundCtx{a, b} {
			select {
			case <-c.Done():
			default:
				t.Fatal("not done after stop")
			}
			if !errors.Is(c.Err(), context.Canceled) {
				t.Fatalf("err %v after stop", c.Err())
			}
		}
	})
}
