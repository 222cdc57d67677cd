package mail

import (
	"context"
	"errors"
	"log/slog"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

// Retry rules (docs/webhooks.md, Email): the wait before each retry, the
// last repeated, until GiveUp after the event.
var Retries = []time.Duration{30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour}

// GiveUp is how long after its event a mail is still tried.
const GiveUp = 3 * 24 * time.Hour

// Poster sends one message; *Sender is the one serve uses.
type Poster interface {
	Send(ctx context.Context, from, to string, msg []byte) error
}

// WorkerConfig is what a Worker sends with; zero values take the defaults.
type WorkerConfig struct {
	From      string // --smtp-from
	PublicURL string // --public-url; "" for no links
	// Slots is how many events this instance mails at once (4).
	Slots int
	// Poll is how often the store is asked for due mail when no commit of
	// this instance wrote one (5 s).
	Poll time.Duration
	// Lease is how long a claimed row is held (5 min): an instance killed
	// mid-send lets another send it again after this long. An attempt
	// stops sending a minute before its lease ends.
	Lease time.Duration
}

// Worker sends due notice emails: it claims mail rows with a lease in the
// store, mails each recipient not yet mailed, and records the result.
// Many instances run one each; the leases keep each row with one of them
// at a time. A kill mid-send leaves the lease to run out and the mail is
// sent again: at least once.
type Worker struct {
	store  *store.Store
	send   Poster
	now    func() time.Time
	log    *slog.Logger
	cfg    WorkerConfig
	wakeCh chan struct{}

	mu    sync.Mutex
	busy  int
	wg    sync.WaitGroup
	retry []time.Duration
}

// NewWorker returns a Worker; call Run to start it. It wakes at once when
// a commit of st writes mail rows.
func NewWorker(st *store.Store, send Poster, now func() time.Time, log *slog.Logger, cfg WorkerConfig) *Worker {
	if now == nil {
		now = time.Now
	}
	if cfg.Slots <= 0 {
		cfg.Slots = 4
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 5 * time.Second
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 5 * time.Minute
	}
	w := &Worker{store: st, send: send, now: now, log: log, cfg: cfg, wakeCh: make(chan struct{}, 1), retry: Retries}
	st.SetMailWake(w.wake)
	return w
}

func (w *Worker) wake() {
	select {
	case w.wakeCh <- struct{}{}:
	default:
	}
}

// Run sends until ctx ends, then waits for the sends in flight (each
// bounded by its time-outs).
func (w *Worker) Run(ctx context.Context) {
	t := time.NewTicker(w.cfg.Poll)
	defer t.Stop()
	for {
		w.round(ctx)
		select {
		case <-ctx.Done():
			w.wg.Wait()
			return
		case <-t.C:
		case <-w.wakeCh:
		}
	}
}

func (w *Worker) round(ctx context.Context) {
	w.mu.Lock()
	free := w.cfg.Slots - w.busy
	w.busy += max(free, 0)
	w.mu.Unlock()
	if free <= 0 {
		return
	}
	now := w.now()
	due, err := w.store.ClaimMail(ctx, domain.NewID("lease", now), now, now.Add(w.cfg.Lease), free)
	if err != nil && ctx.Err() == nil {
		w.log.Error("mail: claim", "err", err)
	}
	w.done(free - len(due))
	for _, d := range due {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer w.done(1)
			w.attempt(context.WithoutCancel(ctx), d)
		}()
	}
}

func (w *Worker) done(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.busy -= n
}

// attempt mails the row's recipients not mailed yet, one message each,
// and records what came of it.
func (w *Worker) attempt(ctx context.Context, d store.MailDue) {
	// Sending stops before the lease ends (a minute before, or a fifth of
	// a short lease), so that no other instance takes the row over while
	// this one still sends.
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Lease-min(time.Minute, w.cfg.Lease/5))
	defer cancel()
	o := store.MailOutcome{EventID: d.Event.ID, Token: d.Token, Attempt: d.Attempt, SentTo: d.SentTo}
	failure := w.sendAll(ctx, d, &o)
	o.At = w.now()
	switch {
	case failure == "":
		o.Done = true
	case o.At.Sub(d.Event.CreatedAt) >= GiveUp:
		o.Error = "given up after 3 days: " + failure
		w.log.Warn("mail: given up", "event", d.Event.ID, "account", d.Event.AccountID, "err", failure)
	default:
		o.Error = failure
		next := o.At.Add(w.retry[min(d.Attempt, len(w.retry))-1])
		o.Next = &next
	}
	if err := w.store.RecordMail(context.WithoutCancel(ctx), o); err != nil {
		w.log.Error("mail: record", "event", d.Event.ID, "err", err)
	}
}

// sendAll sends to each recipient not in o.SentTo, adding those it
// reaches, and returns what failed ("": none). A recipient the server
// refuses for good (a 5xx answer) does not keep the others waiting: the
// next is tried. Any other failure (the server away, slow or saying "try
// later") ends the attempt: the others would meet it too.
func (w *Worker) sendAll(ctx context.Context, d store.MailDue, o *store.MailOutcome) string {
	if d.Event.Type == "" { // deleted with its account's old events: nothing to say
		return ""
	}
	n, ok := Compose(d.Event, d.AccountName, w.cfg.PublicURL)
	if !ok {
		w.log.Warn("mail: event not mailable", "event", d.Event.ID, "type", d.Event.Type)
		return ""
	}
	failed := ""
	for _, r := range d.Recipients {
		if slices.Contains(o.SentTo, r.UserID) {
			continue
		}
		if _, err := ParseAddress(r.Email); err != nil {
			w.log.Warn("mail: recipient address not usable", "event", d.Event.ID, "user", r.UserID)
			continue
		}
		msg, err := Message{From: w.cfg.From, To: r.Email, Subject: n.Subject, Text: n.Text, HTML: n.HTML,
			Date: d.Event.CreatedAt, MessageID: messageID(d.Event.ID, r.UserID, w.cfg.From)}.Build()
		if err != nil {
			return err.Error()
		}
		if err := w.send.Send(ctx, w.cfg.From, r.Email, msg); err != nil {
			w.log.Warn("mail: not sent, will retry", "event", d.Event.ID, "user", r.UserID, "attempt", d.Attempt, "err", err)
			failed = clip(err.Error())
			var te *textproto.Error
			if errors.As(err, &te) && te.Code >= 500 && ctx.Err() == nil {
				continue
			}
			return failed
		}
		o.SentTo = append(o.SentTo, r.UserID)
	}
	return failed
}

// messageID is the same for every attempt of one event to one user, so
// that a mail sent again (at least once) can be told for the same one.
func messageID(eventID, userID, from string) string {
	return eventID + "." + userID + "@" + from[strings.LastIndexByte(from, '@')+1:]
}

// clip keeps an error as the store can hold it: at most 500 bytes of
// valid UTF-8 without NULs (a server's answer is any bytes).
func clip(s string) string {
	if len(s) > 500 {
		s = s[:500]
	}
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "?")
}
