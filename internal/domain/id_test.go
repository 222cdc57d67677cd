package domain

import (
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"
)

// idValue decodes an id's 26 digits into its 128 bits.
func idValue(t *testing.T, prefix, id string) *big.Int {
	t.Helper()
	digits, ok := strings.CutPrefix(id, prefix+"_")
	if !ok || len(digits) != 26 {
		t.Fatalf("id %q: want %s_ and 26 digits", id, prefix)
	}
	v := new(big.Int)
	for _, c := range digits {
		d := strings.IndexRune(idAlphabet, c)
		if d < 0 {
			t.Fatalf("id %q: digit %q is not Crockford base32", id, c)
		}
		v.Lsh(v, 5).Or(v, big.NewInt(int64(d)))
	}
	if v.BitLen() > 128 {
		t.Fatalf("id %q holds more than 128 bits", id)
	}
	return v
}

func idMS(v *big.Int) int64 { return new(big.Int).Rsh(v, 80).Int64() }

// TestNewIDIncreasesWithinAMillisecond: ids made one after another at the
// same instant sort, as strings, in the order they were made; the first
// carries the instant's milliseconds, and they are not consecutive numbers.
func TestNewIDIncreasesWithinAMillisecond(t *testing.T) {
	g := &idGen{}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	prev := g.id(PrefixAgent, at)
	if got := idMS(idValue(t, PrefixAgent, prev)); got != at.UnixMilli() {
		t.Fatalf("first id of the instant carries %d ms, want %d", got, at.UnixMilli())
	}
	prevV := idValue(t, PrefixAgent, prev)
	steps := map[string]bool{}
	for i := range 10_000 {
		id := g.id(PrefixAgent, at)
		v := idValue(t, PrefixAgent, id)
		if id <= prev || v.Cmp(prevV) <= 0 {
			t.Fatalf("id %d made at the same instant %q does not follow %q", i, id, prev)
		}
		if idMS(v) != at.UnixMilli() {
			t.Fatalf("id %d left the millisecond: %d ms", i, idMS(v))
		}
		steps[new(big.Int).Sub(v, prevV).String()] = true
		prev, prevV = id, v
	}
	if len(steps) < 9_990 {
		t.Fatalf("only %d distinct steps between 10,000 ids: the next id is guessable from the last", len(steps))
	}
}

// TestNewIDNewMillisecondStartsAtRandom: the first ids of two milliseconds
// do not share their random part, nor start at its bottom.
func TestNewIDNewMillisecondStartsAtRandom(t *testing.T) {
	g := &idGen{}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mask := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 80), big.NewInt(1))
	seen := map[string]bool{}
	for i := range 64 {
		v := idValue(t, PrefixKey, g.id(PrefixKey, at.Add(time.Duration(i)*time.Millisecond)))
		r := new(big.Int).And(v, mask)
		if r.BitLen() < 40 {
			t.Fatalf("millisecond %d starts its random part at %s", i, r)
		}
		seen[r.String()] = true
	}
	if len(seen) != 64 {
		t.Fatalf("64 milliseconds started at %d distinct points", len(seen))
	}
}

// TestNewIDClockGoingBack: after the clock went back, ids still follow the
// last one made, whatever the prefix.
func TestNewIDClockGoingBack(t *testing.T) {
	g := &idGen{}
	at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	prev := idValue(t, PrefixAgent, g.id(PrefixAgent, at))
	for i, back := range []time.Duration{time.Millisecond, time.Second, 0, time.Hour, time.Millisecond} {
		v := idValue(t, PrefixEvent, g.id(PrefixEvent, at.Add(-back)))
		if v.Cmp(prev) <= 0 {
			t.Fatalf("step %d (clock %v back): id does not follow the last one", i, back)
		}
		prev = v
	}
	if v := idValue(t, PrefixAgent, g.id(PrefixAgent, at.Add(time.Millisecond))); idMS(v) != at.Add(time.Millisecond).UnixMilli() || v.Cmp(prev) <= 0 {
		t.Fatalf("the next millisecond's id carries %d ms", idMS(v))
	}
}

// TestNewIDSpentRandomPart: when adding to the random part would carry into
// the milliseconds, the id moves to the next millisecond, still above.
func TestNewIDSpentRandomPart(t *testing.T) {
	g := &idGen{made: true, ms: 5_000, hi: 1<<16 - 1, lo: ^uint64(0)}
	at := time.UnixMilli(5_000)
	hi, lo := g.next(at)
	if hi>>16 != 5_001 {
		t.Fatalf("after a spent random part: %d ms, want 5001", hi>>16)
	}
	hi2, lo2 := g.next(at)
	if hi2 < hi || hi2 == hi && lo2 <= lo {
		t.Fatal("the id after a spent random part does not follow it")
	}
}

// TestNewIDConcurrent: ids made through NewID by many goroutines at one
// instant are all distinct and increase in each goroutine (run with -race:
// the process's generator is shared).
func TestNewIDConcurrent(t *testing.T) {
	at := time.Now()
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			var mine []string
			for range 2_000 {
				id := NewID(PrefixAgent, at)
				if len(mine) > 0 && id <= mine[len(mine)-1] {
					t.Errorf("a goroutine's ids do not increase: %q after %q", id, mine[len(mine)-1])
					return
				}
				mine = append(mine, id)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range mine {
				seen[id] = true
			}
		})
	}
	wg.Wait()
	if len(seen) != 16_000 {
		t.Fatalf("%d distinct ids of 16,000", len(seen))
	}
}
