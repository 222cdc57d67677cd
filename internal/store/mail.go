package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// Notice emails ride on the outbox (docs/webhooks.md, Email): while mail
// is on (SetMail), writeEvents adds one mail_deliveries row for each
// mailed event, in the event's own transaction. The mail worker claims due
// rows with a lease, as the webhook worker claims deliveries.

// SetMail turns the writing of mail rows on (serve --smtp-url) or off.
// Off, no row is written: nothing waits for a sender that never comes.
func (s *Store) SetMail(on bool) { s.mail.Store(on) }

// insertMail writes ev's mail row when mail is on and ev is mailed.
func insertMail(ctx context.Context, tx *Tx, ev *domain.Event, now time.Time) error {
	if !tx.mail || !domain.Mailed(ev.Type, ev.Extra) {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO mail_deliveries (event_id, account_id, status, next_attempt_at, created_at)
		VALUES ($1, $2, 'pending', $3, $3)`, ev.ID, ev.AccountID, toMS(now)); err != nil {
		return fmt.Errorf("insert mail: %w", err)
	}
	tx.mailed = true
	return nil
}

// Mail delivery states.
const (
	MailPending = "pending"
	MailSent    = "sent"
	MailFailed  = "failed" // given up: last_error says why
)

// Recipient is a user a notice email goes to.
type Recipient struct {
	UserID, Email string
}

// MailDue is a mail row claimed for an attempt: its event, the account's
// name, the recipients as they are now (active Owners and Admins of an
// active account), those already mailed, which attempt this is, and the
// lease's token its result must carry.
type MailDue struct {
	Event       domain.Event
	AccountName string
	Recipients  []Recipient
	SentTo      []string // user ids
	Attempt     int
	Token       string
}

// ClaimMail leases up to n due mail rows until leaseUntil under token,
// oldest due first. On PostgreSQL rows another instance is claiming are
// skipped, not waited for.
func (s *Store) ClaimMail(ctx context.Context, token string, now, leaseUntil time.Time, n int) ([]MailDue, error) {
	// A read first: most polls find nothing due, and need not take the
	// writer (SQLite's one write lock) to learn it.
	var one int
	err := s.r.QueryRowContext(ctx, `SELECT 1 FROM mail_deliveries WHERE status = 'pending' AND next_attempt_at <= $1
		AND lease_until <= $1 LIMIT 1`, toMS(now)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look for due mail: %w", err)
	}
	var out []MailDue
	err = s.inTx(ctx, func(tx *Tx) error {
		rows, err := tx.QueryContext(ctx, `UPDATE mail_deliveries SET lease_until = $1, lease_token = $2
			WHERE event_id IN (SELECT event_id FROM mail_deliveries
				WHERE status = 'pending' AND next_attempt_at <= $3 AND lease_until <= $3
				ORDER BY next_attempt_at LIMIT $4`+s.d.skipLocked+`)
			RETURNING event_id, attempts, sent_to`, toMS(leaseUntil), token, toMS(now), n)
		got, err := collect("claim mail", rows, err, func(r *sql.Rows) (MailDue, error) {
			var d MailDue
			var sent string
			err := r.Scan(&d.Event.ID, &d.Attempt, &sent)
			d.Attempt++
			d.SentTo, d.Token = strings.Fields(sent), token
			return d, err
		})
		if err != nil {
			return err
		}
		for _, d := range got {
			if d, err = fillMail(ctx, tx, d); err != nil {
				return err
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// fillMail reads a claimed row's event, account and recipients. An event
// deleted meanwhile leaves the event's id alone: the row then has nothing
// to send.
func fillMail(ctx context.Context, tx *Tx, d MailDue) (MailDue, error) {
	ev, err := scanEvent(tx.QueryRowContext(ctx, `SELECT `+eventColumns+` FROM events WHERE id = $1`, d.Event.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("get event: %w", err)
	}
	d.Event = ev
	if err := tx.QueryRowContext(ctx, `SELECT name FROM accounts WHERE id = $1`, ev.AccountID).Scan(&d.AccountName); err != nil {
		return d, rowErr("get account", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT u.id, u.email FROM users u JOIN accounts a ON a.id = u.account_id
		WHERE u.account_id = $1 AND u.active AND a.active AND u.role IN ('owner', 'admin') ORDER BY u.created_at, u.id`, ev.AccountID)
	d.Recipients, err = collect("list mail recipients", rows, err, func(r *sql.Rows) (Recipient, error) {
		var rc Recipient
		return rc, r.Scan(&rc.UserID, &rc.Email)
	})
	return d, err
}

// MailOutcome is what an attempt did: the users mailed so far (with those
// of attempts before), and whether the row is done (sent), to be tried
// again at Next, or given up (Next nil, not Done) for Error.
type MailOutcome struct {
	EventID string
	Token   string
	Attempt int
	SentTo  []string
	Done    bool
	Next    *time.Time
	Error   string
	At      time.Time
}

// RecordMail stores an attempt's result if its lease is still the row's;
// ErrNotFound when another instance took the row over (its result
// stands).
func (s *Store) RecordMail(ctx context.Context, o MailOutcome) error {
	status, next := MailFailed, o.At
	switch {
	case o.Done:
		status = MailSent
	case o.Next != nil:
		status, next = MailPending, *o.Next
	}
	sent := slices.Clone(o.SentTo)
	slices.Sort(sent)
	return s.inTx(ctx, func(tx *Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE mail_deliveries SET status = $1, attempts = $2, next_attempt_at = $3,
			sent_to = $4, last_error = $5, lease_until = 0, lease_token = '' WHERE event_id = $6 AND lease_token = $7`,
			status, o.Attempt, toMS(next), strings.Join(slices.Compact(sent), " "), o.Error, o.EventID, o.Token)
		if err != nil {
			return fmt.Errorf("update mail: %w", err)
		}
		return checkAffected(res)
	})
}

// MailState is a mail row as tests and operators read it.
type MailState struct {
	EventID, Status, LastError string
	Attempts                   int
	SentTo                     []string
}

// ListMail lists the mail rows of an account, oldest first.
func (s *Store) ListMail(ctx context.Context, accountID string) ([]MailState, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT event_id, status, last_error, attempts, sent_to FROM mail_deliveries
		WHERE account_id = $1 ORDER BY created_at, event_id`, accountID)
	return collect("list mail", rows, err, func(r *sql.Rows) (MailState, error) {
		var m MailState
		var sent string
		err := r.Scan(&m.EventID, &m.Status, &m.LastError, &m.Attempts, &sent)
		m.SentTo = strings.Fields(sent)
		return m, err
	})
}

// SetMailWake makes every commit that writes mail rows call fn.
func (s *Store) SetMailWake(fn func()) { s.mailWake.fn.Store(&fn) }

func (s *Store) mailDue() {
	if fn := s.mailWake.fn.Load(); fn != nil {
		(*fn)()
	}
}
