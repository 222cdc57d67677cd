package api

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
)

// Idempotency-Key (docs/api.md, Idempotent requests; decisions.md).
const (
	idempotencyHeader = "Idempotency-Key"
	maxIdempotencyKey = 255
	// idempotencyKeep is how long a key is kept, from its first request.
	idempotencyKeep = 24 * time.Hour
	// IdempotencyLease bounds how long a reservation left behind by an
	// instance that died mid-request blocks its key (409 until then). It
	// is well above questionTimeout, the longest bound of a request that
	// is still running, so a live request never loses its key to a retry.
	IdempotencyLease = 5 * time.Minute
	// idemStoreTimeout bounds saving or releasing a key after the request
	// (which may have been cancelled by then).
	idemStoreTimeout = 5 * time.Second
)

// validIdempotencyKey: 1 to 255 printable ASCII characters.
func validIdempotencyKey(k string) bool {
	unprintable := func(c rune) bool { return c < 0x20 || c > 0x7e }
	return len(k) > 0 && len(k) <= maxIdempotencyKey && strings.IndexFunc(k, unprintable) < 0
}

// idempotencyHash identifies a request: its method, path and body bytes.
func idempotencyHash(r *http.Request, body []byte) []byte {
	h := sha256.New()
	io.WriteString(h, r.Method)
	h.Write([]byte{0})
	io.WriteString(h, r.URL.EscapedPath())
	h.Write([]byte{0})
	h.Write(body)
	return h.Sum(nil)
}

// idempotent runs next at most once per Idempotency-Key of an account:
// a request without the header runs as it is; the first with a key
// reserves it in the store and runs; later ones get the saved response,
// or 409 while the first is running, or 400 when they are another request.
func (s *Server) idempotent(next handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		values := r.Header.Values(idempotencyHeader)
		if len(values) > 1 || len(values) == 1 && !validIdempotencyKey(values[0]) {
			return idemKeyError("Idempotency-Key must be one value of 1 to 255 printable ASCII characters.")
		}
		body, err := bodyOf(r)
		if len(values) == 0 || err != nil {
			// No key, or a body too large or cut short: the handler
			// refuses the latter (413 or 400), which would not be saved.
			return next(w, r)
		}
		outcome, saved, res, err := s.store.ReserveIdempotencyKey(r.Context(), store.IdemRequest{
			AccountID: authFrom(r.Context()).key.AccountID, Key: values[0], Hash: idempotencyHash(r, body),
			Now: s.now(), Lease: IdempotencyLease, Keep: idempotencyKeep,
		})
		switch {
		case err != nil:
			return err
		case outcome == store.IdemMismatch:
			return idemKeyError("This Idempotency-Key was used with another request (path or body); use a new key for a new request.")
		case outcome == store.IdemInProgress:
			return domain.Errorf(domain.CodeInconsistentState, "A request with this Idempotency-Key is still in progress; retry later.")
		case outcome == store.IdemReplay:
			writeReplay(w, saved)
		default:
			s.runIdempotent(w, r, s.serve(next), res)
		}
		return nil
	}
}

func idemKeyError(msg string) error {
	return &domain.Error{Code: domain.CodeInvalidValue, Message: msg, Fields: []domain.FieldError{
		{Field: idempotencyHeader, Code: domain.CodeInvalidValue, Message: msg},
	}}
}

// writeReplay answers with a saved response, marked as a replay; the
// headers the request's own checks set (rate limit, request id) stay.
func writeReplay(w http.ResponseWriter, saved store.IdemResponse) {
	h := w.Header()
	h.Set("Idempotent-Replayed", "true")
	if saved.Streamed && writeStreamReplay(w, saved.Status, saved.Body) {
		return
	}
	if saved.Location != "" {
		h.Set("Location", saved.Location)
	}
	writeJSONBytes(w, saved.Status, saved.Body)
}

// runIdempotent runs next under a reservation and ends it (endIdempotent).
// A plain response is held until it is saved, so that a client that has it
// finds it saved; a streamed one goes out as it comes and is saved from
// what the stream handler records (recordAnswer).
func (s *Server) runIdempotent(w http.ResponseWriter, r *http.Request, next http.Handler, res store.IdemReservation) {
	rec := &idemRecorder{w: w}
	ended := false
	defer func() {
		if !ended { // next panicked: let a retry run
			s.endIdempotent(r, res, store.IdemResponse{})
		}
	}()
	next.ServeHTTP(rec, r)
	ended = true
	s.endIdempotent(r, res, rec.outcome())
	rec.finish()
}

// endIdempotent saves resp under res, or releases res. It runs after the
// request, however it ended, so it does not take the request's
// cancellation.
func (s *Server) endIdempotent(r *http.Request, res store.IdemReservation, resp store.IdemResponse) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), idemStoreTimeout)
	defer cancel()
	var err error
	// A response is kept for replays when the handler ran to an outcome
	// (2xx, 404, 409), not a refusal a retry may pass.
	if st := resp.Status; st >= 200 && st < 300 || st == http.StatusNotFound || st == http.StatusConflict {
		err = s.store.SaveIdempotentResponse(ctx, res, resp)
	} else {
		err = s.store.ReleaseIdempotencyKey(ctx, res)
	}
	if err != nil {
		// The key then stays reserved until its lease ends (409 for
		// retries until then), or was taken over already.
		s.log.WarnContext(r.Context(), "idempotency key not ended", "request_id", requestID(r.Context()), "err", err)
	}
}

// idemRecorder holds a handler's response until it is saved, and lets it
// through as it comes once the handler flushes (a stream).
type idemRecorder struct {
	w        http.ResponseWriter
	status   int
	body     bytes.Buffer
	through  bool                // flushed: writes go straight to w
	streamed *store.IdemResponse // what a stream recorded as its outcome
}

func (rec *idemRecorder) Header() http.Header { return rec.w.Header() }

func (rec *idemRecorder) WriteHeader(status int) {
	if rec.status != 0 {
		return
	}
	rec.status = status
	if rec.through {
		rec.w.WriteHeader(status)
	}
}

func (rec *idemRecorder) Write(p []byte) (int, error) {
	if rec.status == 0 {
		rec.WriteHeader(http.StatusOK)
	}
	if rec.through {
		return rec.w.Write(p)
	}
	return rec.body.Write(p)
}

// Flush switches to passing through: what was held goes out first.
func (rec *idemRecorder) Flush() {
	rec.finish()
	_ = http.NewResponseController(rec.w).Flush()
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (rec *idemRecorder) Unwrap() http.ResponseWriter { return rec.w }

// outcome is the response to save: a stream's recorded outcome, or what
// was held; a stream that recorded none (it failed) saves nothing.
func (rec *idemRecorder) outcome() store.IdemResponse {
	switch {
	case rec.streamed != nil:
		return *rec.streamed
	case rec.through:
		return store.IdemResponse{}
	}
	return store.IdemResponse{Status: cmp.Or(rec.status, http.StatusOK), Location: rec.w.Header().Get("Location"), Body: bytes.Clone(rec.body.Bytes())}
}

// finish sends what is still held, and passes the rest through.
func (rec *idemRecorder) finish() {
	if rec.through {
		return
	}
	rec.through = true
	if rec.status != 0 {
		rec.w.WriteHeader(rec.status)
	}
	if rec.body.Len() > 0 {
		_, _ = rec.w.Write(rec.body.Bytes())
		rec.body.Reset()
	}
}
