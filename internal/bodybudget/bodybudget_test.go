package bodybudget

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// TestShare: an owner holds at most its share; another owner still gets
// room, and the owner's next growth waits, then is refused with ErrShare.
func TestShare(t *testing.T) {
	b := New(64<<20, 100*time.Millisecond)
	if b.Share() != 8<<20 {
		t.Fatalf("share %d, want an eighth", b.Share())
	}
	if small := New(4<<20, 0); small.Share() != MinShare {
		t.Fatalf("share of 4 MiB: %d, want MinShare", small.Share())
	}
	if tiny := New(1<<10, 0); tiny.Share() != 1<<10 {
		t.Fatalf("share of 1 KiB: %d, want the whole budget", tiny.Share())
	}
	a := b.Hold("account:a")
	if err := a.Grow(context.Background(), 8<<20); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := b.Hold("account:a").Grow(context.Background(), 1); !errors.Is(err, ErrShare) {
		t.Fatalf("past the share: %v, want ErrShare", err)
	}
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Fatalf("refused after %v, without waiting", waited)
	}
	other := b.Hold("account:b")
	if err := other.Grow(context.Background(), 8<<20); err != nil {
		t.Fatalf("another owner: %v", err)
	}
	a.Release()
	other.Release()
	if total, byA := b.Used("account:a"); total != 0 || byA != 0 {
		t.Fatalf("after release: %d in total, %d by a", total, byA)
	}
}

// TestBusyWaitsForRelease: a growth that does not fit waits for bytes
// given back, and is refused with ErrBusy if none come in time.
func TestBusyWaitsForRelease(t *testing.T) {
	b := New(4<<20, 500*time.Millisecond)
	holds := []*Hold{b.Hold("a"), b.Hold("b")}
	for _, h := range holds {
		if err := h.Grow(context.Background(), 2<<20); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		holds[0].Release()
	}()
	c := b.Hold("c")
	if err := c.Grow(context.Background(), 1<<20); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if err := b.Hold("d").Grow(context.Background(), 2<<20); !errors.Is(err, ErrBusy) {
		t.Fatalf("full: %v, want ErrBusy", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Hold("d").Grow(ctx, 2<<20); !errors.Is(err, ErrBusy) {
		t.Fatalf("cancelled: %v", err)
	}
}

// slowReader returns its bytes in pieces, then blocks until released.
type slowReader struct {
	data    []byte
	piece   int
	stalled chan struct{}
	release chan struct{}
}

func (s *slowReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		close(s.stalled)
		<-s.release
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), s.piece)], s.data)
	s.data = s.data[n:]
	return n, nil
}

// TestReadReservesWhatArrives: a body declaring 1 MiB that has sent
// 10 KiB holds at most twice that, not the declared length.
func TestReadReservesWhatArrives(t *testing.T) {
	b := New(64<<20, 0)
	h := b.Hold("a")
	r := &slowReader{data: bytes.Repeat([]byte("x"), 10<<10), piece: 1000, stalled: make(chan struct{}), release: make(chan struct{})}
	done := make(chan []byte)
	go func() {
		body, err := h.Read(context.Background(), r, 1<<20, 1<<20)
		if err != nil {
			t.Error(err)
		}
		done <- body
	}()
	<-r.stalled
	if _, held := b.Used("a"); held > 20<<10 || held < 10<<10 {
		t.Errorf("10 KiB sent of 1 MiB declared: %d bytes held", held)
	}
	close(r.release)
	if body := <-done; len(body) != 10<<10 {
		t.Fatalf("read %d bytes", len(body))
	}
	if h.Held() < 10<<10 || h.Held() > 20<<10 {
		t.Fatalf("holds %d after the read", h.Held())
	}
	h.Release()
}

// TestReadExactWhenDeclared: a small declared body is read into one
// buffer of its length (+1), reserved once.
func TestReadExactWhenDeclared(t *testing.T) {
	b := New(1<<20, 0)
	h := b.Hold("a")
	body, err := h.Read(context.Background(), strings.NewReader("hello"), 5, 1<<20)
	if err != nil || string(body) != "hello" || cap(body) != 6 || h.Held() != 6 {
		t.Fatalf("%q %v cap %d held %d", body, err, cap(body), h.Held())
	}
	h.Release()
	unknown := b.Hold("a")
	body, err = unknown.Read(context.Background(), strings.NewReader(strings.Repeat("y", 10000)), -1, 1<<20)
	if err != nil || len(body) != 10000 || unknown.Held() != int64(cap(body)) {
		t.Fatalf("%d bytes, %v, cap %d, held %d", len(body), err, cap(body), unknown.Held())
	}
}

// TestReadRefusedMidBody: a body that outgrows its owner's share is
// refused, with the bytes read so far, and holds no more than the share.
func TestReadRefusedMidBody(t *testing.T) {
	b := New(16<<20, 50*time.Millisecond)
	other := b.Hold("a")
	if err := other.Grow(context.Background(), 3<<19); err != nil {
		t.Fatal(err)
	}
	h := b.Hold("a")
	_, err := h.Read(context.Background(), bytes.NewReader(make([]byte, 1<<20)), 1<<20, 1<<20)
	if !errors.Is(err, ErrShare) {
		t.Fatalf("%v, want ErrShare", err)
	}
	if _, held := b.Used("a"); held > 2<<20 {
		t.Fatalf("holds %d", held)
	}
}
