package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"syscall"
)

// classify names why an attempt got no answer, as the delivery log shows
// it. The attempt's own deadline passing is a time-out wherever it struck
// (lookup, connect, TLS, waiting for the answer).
func classify(ctx context.Context, err error) string {
	switch {
	case errors.Is(err, errNotAllowed):
		return ClassAddressNotAllowed
	case isTimeout(ctx, err):
		return ClassTimeout
	case isDNS(err):
		return ClassDNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return ClassConnectionRefused
	case isTLS(err):
		return ClassTLS
	}
	return ClassConnectionError
}

func isTimeout(ctx context.Context, err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isDNS: the name could not be turned into addresses (not found, or the
// resolver failed); a lookup that ran out of time is a time-out instead.
func isDNS(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de)
}

// isTLS: the handshake failed, whichever side refused (a certificate that
// does not verify, an alert from the server, a server that does not speak TLS).
func isTLS(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		record   tls.RecordHeaderError
		alert    tls.AlertError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	if errors.As(err, &verify) || errors.As(err, &record) || errors.As(err, &alert) ||
		errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) {
		return true
	}
	// An alert sent or received during the handshake comes as a *net.OpError
	// whose Op crypto/tls names "remote error" or "local error" (the alert's
	// own type is unexported).
	var op *net.OpError
	return errors.As(err, &op) && (op.Op == "remote error" || op.Op == "local error")
}
