package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// --- Idempotency-Key ---
//
// A key is a row of idempotency_keys (migration 0008). Reserving it is one
// transaction on either engine: an INSERT that a concurrent reservation of
// the same key makes wait (PostgreSQL) or queue (SQLite's single writer),
// then a locked read of the row that is there. So of two instances receiving
// one key at once exactly one runs the request; the other finds the
// reservation (in progress) or, once saved, the response.

// IdemOutcome is what a reservation found.
type IdemOutcome int

const (
	// IdemRun: the key is the caller's to run the request under; it must
	// end with SaveIdempotentResponse or ReleaseIdempotencyKey.
	IdemRun IdemOutcome = iota + 1
	// IdemReplay: the key holds a saved response for the same request.
	IdemReplay
	// IdemInProgress: another request with the key is running.
	IdemInProgress
	// IdemMismatch: the key was used for another method, path or body.
	IdemMismatch
)

// IdemResponse is a saved response.
type IdemResponse struct {
	Status   int
	Location string
	Body     []byte
	// Streamed: the outcome of a streamed question (status and body as
	// the same question unstreamed would have had).
	Streamed bool
}

// IdemReservation names a reservation the caller holds.
type IdemReservation struct {
	AccountID, Key string
	// owner tells this reservation from a later one of the same key that
	// took it over after its lease ran out.
	owner string
}

// IdemRequest is a reservation request.
type IdemRequest struct {
	AccountID, Key string
	Hash           []byte        // SHA-256 of method, path and body
	Now            time.Time     //
	Lease          time.Duration // how long the reservation blocks the key if never ended
	Keep           time.Duration // how long the key lives, from its first request
}

// ReserveIdempotencyKey reserves req's key or reports what holds it: a
// reservation still in its lease, a saved response, or another request. A
// reservation past its lease (its instance died) is taken over, and a key
// past its expiry is reused as if new.
func (s *Store) ReserveIdempotencyKey(ctx context.Context, req IdemRequest) (IdemOutcome, IdemResponse, IdemReservation, error) {
	if !storable(req.AccountID, req.Key) {
		return 0, IdemResponse{}, IdemReservation{}, fmt.Errorf("reserve idempotency key: %w", domain.ErrNotFound)
	}
	res := IdemReservation{AccountID: req.AccountID, Key: req.Key, owner: newOwner()}
	var (
		outcome IdemOutcome
		saved   IdemResponse
	)
	err := s.inTx(ctx, func(tx *Tx) error {
		var err error
		outcome, saved, err = s.reserveIn(ctx, tx, req, res.owner)
		return err
	})
	if err != nil {
		return 0, IdemResponse{}, IdemReservation{}, fmt.Errorf("reserve idempotency key: %w", err)
	}
	return outcome, saved, res, nil
}

func (s *Store) reserveIn(ctx context.Context, tx *Tx, req IdemRequest, owner string) (IdemOutcome, IdemResponse, error) {
	now, lease := toMS(req.Now), toMS(req.Now.Add(req.Lease))
	ins, err := tx.ExecContext(ctx, `INSERT INTO idempotency_keys
		(account_id, idem_key, request_hash, owner, lease_until, status, location, body, streamed, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, 0, '', $6, FALSE, $7, $8)
		ON CONFLICT (account_id, idem_key) DO NOTHING`,
		req.AccountID, req.Key, req.Hash, owner, lease, []byte{}, now, toMS(req.Now.Add(req.Keep)))
	if err != nil {
		return 0, IdemResponse{}, fmt.Errorf("insert: %w", err)
	}
	if n, err := ins.RowsAffected(); err != nil {
		return 0, IdemResponse{}, fmt.Errorf("rows affected: %w", err)
	} else if n == 1 {
		return IdemRun, IdemResponse{}, nil
	}
	var (
		hash                []byte
		leaseUntil, expires int64
		saved               IdemResponse
	)
	err = tx.QueryRowContext(ctx, `SELECT request_hash, lease_until, expires_at, status, location, body, streamed
		FROM idempotency_keys WHERE account_id = $1 AND idem_key = $2`+s.d.forUpdate,
		req.AccountID, req.Key).Scan(&hash, &leaseUntil, &expires, &saved.Status, &saved.Location, &saved.Body, &saved.Streamed)
	if errors.Is(err, sql.ErrNoRows) {
		// Swept or released between the two statements: the caller's
		// retry reserves it.
		return IdemInProgress, IdemResponse{}, nil
	}
	if err != nil {
		return 0, IdemResponse{}, fmt.Errorf("read: %w", err)
	}
	switch {
	case expires <= now:
		_, err = tx.ExecContext(ctx, `UPDATE idempotency_keys SET request_hash = $3, owner = $4, lease_until = $5,
			status = 0, location = '', body = $6, streamed = FALSE, created_at = $7, expires_at = $8
			WHERE account_id = $1 AND idem_key = $2`,
			req.AccountID, req.Key, req.Hash, owner, lease, []byte{}, now, toMS(req.Now.Add(req.Keep)))
	case !bytes.Equal(hash, req.Hash):
		return IdemMismatch, IdemResponse{}, nil
	case saved.Status != 0:
		return IdemReplay, saved, nil
	case leaseUntil > now:
		return IdemInProgress, IdemResponse{}, nil
	default:
		_, err = tx.ExecContext(ctx, `UPDATE idempotency_keys SET owner = $3, lease_until = $4
			WHERE account_id = $1 AND idem_key = $2`, req.AccountID, req.Key, owner, lease)
	}
	if err != nil {
		return 0, IdemResponse{}, fmt.Errorf("take over: %w", err)
	}
	return IdemRun, IdemResponse{}, nil
}

// SaveIdempotentResponse ends a reservation by saving its response, which
// later requests with the key get back. ErrNotFound: the reservation is no
// longer the caller's (its lease ran out and another request took it).
func (s *Store) SaveIdempotentResponse(ctx context.Context, res IdemReservation, resp IdemResponse) error {
	if resp.Status <= 0 {
		return errors.New("save idempotent response: no status")
	}
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	r, err := s.w.ExecContext(ctx, `UPDATE idempotency_keys SET status = $4, location = $5, body = $6, streamed = $7
		WHERE account_id = $1 AND idem_key = $2 AND owner = $3 AND status = 0`,
		res.AccountID, res.Key, res.owner, resp.Status, resp.Location, body, resp.Streamed)
	if err != nil {
		return fmt.Errorf("save idempotent response: %w", err)
	}
	return checkAffected(r)
}

// ReleaseIdempotencyKey ends a reservation without a response, so that
// the next request with the key runs. A reservation taken over is left alone.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, res IdemReservation) error {
	_, err := s.w.ExecContext(ctx, `DELETE FROM idempotency_keys
		WHERE account_id = $1 AND idem_key = $2 AND owner = $3 AND status = 0`,
		res.AccountID, res.Key, res.owner)
	if err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}

// SweepIdempotencyKeys deletes at most batch keys expired at now, and
// reports how many it deleted; each call is one short statement, so a
// large backlog is swept by calling it until it returns less than batch.
func (s *Store) SweepIdempotencyKeys(ctx context.Context, now time.Time, batch int) (int, error) {
	if batch <= 0 {
		return 0, errors.New("sweep idempotency keys: batch must be positive")
	}
	r, err := s.w.ExecContext(ctx, `DELETE FROM idempotency_keys WHERE (account_id, idem_key) IN (
		SELECT account_id, idem_key FROM idempotency_keys WHERE expires_at <= $1 LIMIT $2)`, toMS(now), batch)
	if err != nil {
		return 0, fmt.Errorf("sweep idempotency keys: %w", err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sweep idempotency keys: %w", err)
	}
	return int(n), nil
}

func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
