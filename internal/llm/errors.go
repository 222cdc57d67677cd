package llm

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/url"
	"syscall"
)

// Kind classifies a failed completion, so callers can count failures by
// cause and react to them without matching error text.
type Kind int

// The kinds of failure Complete reports.
const (
	KindTransport Kind = iota + 1 // no usable connection, or it broke mid-exchange
	KindTimeout                   // the client's own time bound ran out
	KindCanceled                  // the caller's context ended first
	KindStatus                    // the provider answered a non-2xx status
	KindMalformed                 // the answer was not a Chat Completions JSON object
	KindTooLarge                  // the answer exceeded the size cap
	KindEmpty                     // well-formed, but no choice or no text in it
)

// Sentinels, one per Kind, for errors.Is.
var (
	ErrTransport = errors.New("llm: provider unreachable")
	ErrTimeout   = errors.New("llm: timed out")
	ErrCanceled  = errors.New("llm: request canceled")
	ErrStatus    = errors.New("llm: provider answered an error status")
	ErrMalformed = errors.New("llm: malformed response")
	ErrTooLarge  = errors.New("llm: response too large")
	ErrEmpty     = errors.New("llm: no answer in response")
)

var sentinels = [...]error{
	KindTransport: ErrTransport, KindTimeout: ErrTimeout, KindCanceled: ErrCanceled, KindStatus: ErrStatus,
	KindMalformed: ErrMalformed, KindTooLarge: ErrTooLarge, KindEmpty: ErrEmpty,
}

// Error is every failure Complete returns. Its text is composed here from
// fixed phrases only: callers log it, and a provider that echoes the prompt
// or the API key into its error bodies (or a peer that is not HTTP at all)
// must not get that text into our logs.
type Error struct {
	Kind   Kind
	Status int // the provider's HTTP status, for KindStatus
	msg    string
	cause  error // context errors or the network error; never response text
}

func (e *Error) Error() string { return e.msg }

// Is makes errors.Is(err, ErrTimeout) and friends work.
func (e *Error) Is(target error) bool {
	return target != nil && e.Kind > 0 && int(e.Kind) < len(sentinels) && target == sentinels[e.Kind]
}

// Unwrap exposes the cause, so errors.Is(err, context.Canceled) holds when
// the caller went away.
func (e *Error) Unwrap() error { return e.cause }

// transportError reports a failure of the exchange itself. Its text names
// the cause coarsely rather than quoting the network error: the transport's
// own messages may quote bytes the peer sent (a malformed status line, say).
func transportError(err error) *Error {
	var (
		dns     *net.DNSError
		certErr *tls.CertificateVerificationError
		reason  string
	)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		reason = "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		reason = "connection closed by provider"
	case errors.As(err, &dns):
		reason = "name resolution failed"
	case errors.As(err, &certErr):
		reason = "certificate not trusted"
	}
	msg := ErrTransport.Error()
	if reason != "" {
		msg += ": " + reason
	}
	return &Error{Kind: KindTransport, msg: msg, cause: err}
}

// exchangeError classifies an error from sending the request or reading the
// answer. parent is the caller's context, reqCtx the one bounded by the
// client's timeout.
func (c *Client) exchangeError(parent, reqCtx context.Context, err error) *Error {
	// The *url.Error wrapper quotes the endpoint, which may carry secrets
	// in its query (Azure deployments); keep only what it wraps.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if perr := parent.Err(); perr != nil {
		msg := ErrCanceled.Error()
		if errors.Is(perr, context.DeadlineExceeded) {
			// The caller's own deadline, not ours: still the caller giving up.
			msg += ": caller's deadline exceeded"
		}
		return &Error{Kind: KindCanceled, msg: msg, cause: perr}
	}
	if errors.Is(context.Cause(reqCtx), errOwnDeadline) {
		return &Error{Kind: KindTimeout, msg: "llm: timed out after " + c.timeout.String(), cause: context.DeadlineExceeded}
	}
	// A caller-supplied http.Client may carry its own Timeout, and dials
	// time out on their own.
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &Error{Kind: KindTimeout, msg: ErrTimeout.Error(), cause: err}
	}
	return transportError(err)
}
