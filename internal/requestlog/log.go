// Package requestlog owns the request log: what a log holds (Log), the
// classes requests are counted in, the packed format the store keeps logs
// in (Buffer: format.go), how a page is picked from packed batches
// (page.go), and whose logs go first when an account holds too many
// (FairShares). The SQL that reads and writes the batches is the store's.
package requestlog

import (
	"cmp"
	"slices"
	"time"
)

// Usage classes: every status is counted in one of them.
const (
	Class2xx = "2xx" // below 400: success (v1 answers no 1xx or 3xx of its own)
	Class4xx = "4xx" // 400–499 other than 429
	Class429 = "429"
	Class5xx = "5xx"
)

// Classes lists the classes in the order charts stack them.
var Classes = []string{Class2xx, Class4xx, Class429, Class5xx}

// ClassOf is status's class.
func ClassOf(status int) string {
	switch {
	case status == 429:
		return Class429
	case status >= 500:
		return Class5xx
	case status >= 400:
		return Class4xx
	}
	return Class2xx
}

// Log is one /v1 request that identified a key. It holds no body,
// query string or header.
type Log struct {
	ID        string // the request id
	AccountID string
	KeyID     string
	At        time.Time
	Method    string
	Route     string // the matched pattern, or "unmatched"
	Path      string // escaped, without the query string
	Status    int
	ErrorCode string // "" on success
	Duration  time.Duration
	Client    string
}

// NewestFirst sorts logs by (at, id), newest first, and keeps one of a log
// written twice.
func NewestFirst(logs []Log) []Log {
	slices.SortFunc(logs, func(a, b Log) int { return cmp.Or(b.At.Compare(a.At), cmp.Compare(b.ID, a.ID)) })
	return slices.CompactFunc(logs, func(a, b Log) bool { return a.ID == b.ID && a.At.Equal(b.At) })
}

// FairShares is how many logs each key keeps, given how many each holds
// (held), when together they may keep at most limit: every key keeps its
// logs up to one level, the highest at which they fit, and the keys above
// it are cut to that level (the first of them keep one more while the
// limit allows). So logs go from the key holding the most first: no key
// flooding its account's logs pushes out another key's.
func FairShares(held []int64, limit int64) []int64 {
	kept := func(level int64) (n int64) {
		for _, h := range held {
			n += min(h, level)
		}
		return n
	}
	lo, hi := int64(0), limit // kept(lo) <= limit; the level is in [lo, hi]
	for lo < hi {
		if mid := (lo + hi + 1) / 2; kept(mid) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	slack := limit - kept(lo)
	out := make([]int64, len(held))
	for i, h := range held {
		out[i] = min(h, lo)
		if h > lo && slack > 0 {
			out[i]++
			slack--
		}
	}
	return out
}

// FloorSec is the Unix second of Unix milliseconds ms.
func FloorSec(ms int64) int64 {
	s := ms / 1000
	if ms%1000 < 0 {
		s--
	}
	return s
}
