package console

import (
	"bytes"
	"context"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
)

// The Logs page's live tail (docs/console.md, Logs): a stream of
// server-sent events (text/event-stream) carrying each new log that the
// page's filters keep, as a row of the page's table. It reads the store,
// once a second, what the usage recorder has flushed there (each second),
// so it follows the requests every instance serves and costs a /v1
// request nothing. A log is the request's start time, written once it is
// answered: each read goes back tailWindow, and the logs already sent are
// skipped, so a request that took up to tailWindow still shows.
//
// Bounds: a session has at most LiveTail.PerSession streams open at once
// (on one instance; each instance counts its own), an instance
// maxTailStreams, and a stream lasts at most LiveTail.MaxDuration; past a
// bound the stream sends an "end" event saying why, and console.js stops.

// tailPath is the live tail's address; the Logs page's filters follow it
// as its query.
const tailPath = logsPath + "/tail"

// LiveTail bounds the Logs page's live tail.
type LiveTail struct {
	// MaxDuration is how long one stream lasts (DefaultLiveTail's when 0).
	MaxDuration time.Duration
	// PerSession is how many streams a session may have open at once
	// (DefaultLiveTail's when 0).
	PerSession int
	// Poll is how often a stream reads the store (DefaultLiveTail's
	// when 0).
	Poll time.Duration
}

// DefaultLiveTail: 15 minutes a stream, 2 open a session, a read a second
// (the usage recorder's flush interval).
var DefaultLiveTail = LiveTail{MaxDuration: 15 * time.Minute, PerSession: 2, Poll: time.Second}

const (
	// maxTailStreams bounds the streams one instance serves at once.
	maxTailStreams = 200
	// tailWindow is how far back each read of a stream goes.
	tailWindow = 30 * time.Second
	// maxTailResume is how far back a stream resumed with since= starts.
	maxTailResume = 10 * time.Minute
	// tailBatch bounds the logs one read sends.
	tailBatch = 100
	// tailKeepAlive is how often an idle stream sends a comment, so that
	// proxies keep it open.
	tailKeepAlive = 15 * time.Second
)

// tails counts the open streams, by session.
type tails struct {
	mu    sync.Mutex
	open  map[string]int
	total int
}

// acquire counts a stream of session sid; false, with why, past a bound.
func (t *tails) acquire(sid string, perSession int) (bool, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.open[sid] >= perSession:
		return false, "Live tail is already open in " + strconv.Itoa(perSession) + " tabs of this session: close one, then resume here."
	case t.total >= maxTailStreams:
		return false, "Live tail is busy on this server: try again in a minute."
	}
	if t.open == nil {
		t.open = map[string]int{}
	}
	t.open[sid]++
	t.total++
	return true, ""
}

func (t *tails) release(sid string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.open[sid]--; t.open[sid] <= 0 {
		delete(t.open, sid)
	}
	t.total--
}

// tailStream is one stream's state: its query and the logs it sent.
type tailStream struct {
	c     *Console
	q     store.RequestLogQuery
	from  time.Time // the user's From filter, or zero
	since time.Time // where the next read starts
	sent  map[string]time.Time
	w     http.ResponseWriter
	rc    *http.ResponseController
}

func (c *Console) handleTail(w http.ResponseWriter, r *http.Request, s *session) error {
	q := store.RequestLogQuery{AccountID: s.user.AccountID, Limit: tailBatch}
	_, errs, err := c.logQuery(r, &q)
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		return &pageError{Status: http.StatusBadRequest, Field: errs[0].Field, Message: errs[0].Message}
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	ts := &tailStream{c: c, q: q, from: q.From, sent: map[string]time.Time{}, w: w, rc: http.NewResponseController(w)}
	sid := hex.EncodeToString(s.tokenHash)
	if ok, why := c.tails.acquire(sid, c.LiveTail.PerSession); !ok {
		return ts.end(why)
	}
	defer c.tails.release(sid)
	// The stream outlives the server's write timeout, to its own bound.
	_ = ts.rc.SetWriteDeadline(time.Time{})
	now := c.Now()
	ts.since = now.Add(-tailWindow)
	if ms, err := strconv.ParseInt(r.URL.Query().Get("since"), 10, 64); err == nil {
		ts.since = earlier(later(time.UnixMilli(ms), now.Add(-maxTailResume)), now)
	}
	return ts.run(r.Context())
}

// run reads and sends until the client goes or the stream's time is up.
func (ts *tailStream) run(ctx context.Context) error {
	bound := time.NewTimer(ts.c.LiveTail.MaxDuration)
	defer bound.Stop()
	poll := time.NewTicker(ts.c.LiveTail.Poll)
	defer poll.Stop()
	idle := time.Duration(0)
	if err := ts.send(ctx); err != nil {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-bound.C:
			return ts.end("Live tail stopped after " + minutes(ts.c.LiveTail.MaxDuration) + ". Resume it to follow new requests again.")
		case <-poll.C:
		}
		n, err := ts.read(ctx)
		if err != nil {
			return ts.end("Live tail stopped: the logs could not be read. Resume it to try again.")
		}
		if n == 0 {
			if idle += ts.c.LiveTail.Poll; idle < tailKeepAlive {
				continue
			}
			if _, err := ts.w.Write([]byte(": keep-alive\n\n")); err != nil {
				return nil
			}
		}
		idle = 0
		if err := ts.rc.Flush(); err != nil {
			return nil
		}
	}
}

// send reads once and flushes: the first read, and the stream's headers.
func (ts *tailStream) send(ctx context.Context) error {
	if _, err := ts.read(ctx); err != nil {
		return err
	}
	return ts.rc.Flush()
}

// read writes the logs the store holds since ts.since that were not sent
// yet, oldest first, and moves the window on; n is how many.
func (ts *tailStream) read(ctx context.Context) (n int, err error) {
	ctx, cancel := context.WithTimeout(ctx, pageTimeout)
	defer cancel()
	now := ts.c.Now()
	q := ts.q
	q.From = later(ts.from, ts.since)
	logs, _, err := ts.c.Store.RequestLogPage(ctx, q)
	if err != nil {
		return 0, err
	}
	var fresh []requestlog.Log
	for i := len(logs) - 1; i >= 0; i-- {
		if _, ok := ts.sent[logs[i].ID]; !ok {
			fresh = append(fresh, logs[i])
			ts.sent[logs[i].ID] = logs[i].At
		}
	}
	ts.since = later(ts.since, now.Add(-tailWindow))
	for id, at := range ts.sent {
		if at.Before(ts.since) {
			delete(ts.sent, id)
		}
	}
	if len(fresh) == 0 {
		return 0, nil
	}
	labels, err := keyLabels(ctx, ts.c.Store, q.AccountID, fresh, func(l requestlog.Log) string { return l.KeyID })
	if err != nil {
		return 0, err
	}
	var buf bytes.Buffer
	for _, row := range logRows(fresh, labels) {
		buf.Reset()
		if err := ts.c.pages["logs"].ExecuteTemplate(&buf, "logrow", row); err != nil {
			return 0, err
		}
		if err := ts.event("log", row.ID, buf.String()); err != nil {
			return 0, err
		}
	}
	return len(fresh), nil
}

// event writes one server-sent event: each line of data its own data:
// line, so no line break in it can end the event early.
func (ts *tailStream) event(name, id, data string) error {
	var b strings.Builder
	b.WriteString("event: " + name + "\n")
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	for _, line := range strings.FieldsFunc(data, func(r rune) bool { return r == '\n' || r == '\r' }) {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	_, err := ts.w.Write([]byte(b.String()))
	return err
}

// end sends the "end" event, why the stream stops, and ends it.
func (ts *tailStream) end(why string) error {
	if ts.event("end", "", why) == nil {
		_ = ts.rc.Flush()
	}
	return nil
}

// minutes is d as the end message says it: "15 minutes", "2 seconds".
func minutes(d time.Duration) string {
	if d >= time.Minute {
		return strconv.Itoa(int(d/time.Minute)) + " minutes"
	}
	return strconv.Itoa(int(d/time.Second)) + " seconds"
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
