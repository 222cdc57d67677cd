package requestlog

import (
	"cmp"
	"container/heap"
)

// Filter is a page's test of one log, times in Unix milliseconds.
type Filter struct {
	AccountID, KeyID, Class, Route, RequestID string
	Status                                    int   // an exact status, or 0
	Lo, Hi                                    int64 // Lo <= at < Hi
	// When HasAfter, a log is kept only when strictly older than
	// (AfterAt, AfterID): the page after a cursor.
	AfterAt  int64
	AfterID  string
	HasAfter bool
	Limit    int // the logs a page shows
}

// Keep reports whether p passes f.
func (f *Filter) Keep(p *Packed) bool {
	switch {
	case p.at < f.Lo || p.at >= f.Hi,
		f.Status != 0 && p.status != f.Status,
		f.Class != "" && ClassOf(p.status) != f.Class,
		!routeKeeps(f.Route, p.route),
		f.RequestID != "" && string(p.id) != f.RequestID:
		return false
	}
	if f.HasAfter && (p.at > f.AfterAt || p.at == f.AfterAt && string(p.id) >= f.AfterID) {
		return false
	}
	return true
}

// Page gathers a page from batches read newest second first. Each
// second's matching logs go through a top-N (newestOf): a second may hold
// more of them than the page takes.
type Page struct {
	f         *Filter
	out       []Log
	cur       int64 // the second whose logs second holds
	second    newestOf
	truncated bool // a second held more matching logs than the page took
	d         Decoder
	p         Packed
}

// NewPage gathers the page f asks for.
func NewPage(f *Filter) *Page { return &Page{f: f, second: newestOf{n: f.Limit + 1}} }

// Full reports that the page holds more logs than it shows: the rest need
// not be read.
func (pg *Page) Full() bool { return len(pg.out) > pg.f.Limit }

// endSecond adds the current second's logs to the page.
func (pg *Page) endSecond() {
	pg.truncated = pg.truncated || pg.second.dropped
	pg.out = append(pg.out, NewestFirst(pg.second.h)...) // a log written twice once
	pg.second = newestOf{n: pg.f.Limit + 1 - len(pg.out)}
}

// Take unpacks one batch into the page; false once the page is full.
func (pg *Page) Take(sec int64, keyID string, blob []byte) (bool, error) {
	if sec != pg.cur {
		pg.endSecond()
		if pg.Full() {
			return false, nil
		}
		pg.cur = sec
	}
	pg.d.Reset(blob, sec)
	for pg.d.Next(&pg.p) {
		if pg.f.Keep(&pg.p) {
			pg.second.offer(&pg.p, pg.f.AccountID, keyID)
		}
	}
	return true, pg.d.err
}

// Result is the page, and whether more logs follow its last.
func (pg *Page) Result() (logs []Log, more bool) {
	pg.endSecond()
	out, limit := pg.out, pg.f.Limit
	if len(out) <= limit && !pg.truncated || len(out) == 0 {
		return out, false
	}
	// A page is short of Limit while there are more only when a log was
	// written twice (a lost acknowledgement) and both took a place.
	return out[:min(len(out), limit)], true
}

// newestOf keeps the newest n logs it is offered, by (at, id): a page
// holds at most a page of the logs of one second, however many it has.
type newestOf struct {
	n       int
	h       logHeap
	dropped bool // a log offered was not kept
}

func (k *newestOf) offer(p *Packed, accountID, keyID string) {
	if k.n <= 0 {
		k.dropped = true
		return
	}
	if len(k.h) == k.n {
		k.dropped = true
		root := &k.h[0]
		if at := root.At.UnixMilli(); p.at < at || p.at == at && string(p.id) <= root.ID {
			return
		}
		*root = p.Log(accountID, keyID)
		heap.Fix(&k.h, 0)
		return
	}
	heap.Push(&k.h, p.Log(accountID, keyID))
}

// logHeap is a heap of logs, the oldest at its root.
type logHeap []Log

func (h logHeap) Len() int { return len(h) }
func (h logHeap) Less(i, j int) bool {
	return cmp.Or(h[i].At.Compare(h[j].At), cmp.Compare(h[i].ID, h[j].ID)) < 0
}
func (h logHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *logHeap) Push(x any)   { *h = append(*h, x.(Log)) }
func (h *logHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// MinMS and MaxMS bound a log's time when a query sets none.
const (
	MinMS = -1 << 62
	MaxMS = 1 << 62
)
