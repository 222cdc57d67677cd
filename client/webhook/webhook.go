// Package webhook signs and verifies webhook deliveries the way the Standard
// Webhooks specification (v1, symmetric) defines them: agentapi sends every
// delivery with these headers, and a receiver checks them with Verify before
// trusting the body.
//
// A delivery carries three headers:
//
//	webhook-id:        the event id, the same on every attempt (deduplicate on it)
//	webhook-timestamp: the attempt's time in Unix seconds
//	webhook-signature: "v1,<base64 HMAC-SHA256>", space-separated when the
//	                   endpoint's secret is being rotated and two are valid
//
// The signed content is "{webhook-id}.{webhook-timestamp}.{body}", keyed with
// the endpoint's secret decoded from base64: a secret reads
// "whsec_<base64>", and the key is the bytes the base64 stands for, not the
// string. Verify and Sign take the secret as agentapi shows it (a bare
// base64 secret, as other Standard Webhooks libraries accept, works too).
//
// Verify the raw body as it arrived: parsing the JSON and encoding it again
// changes bytes and breaks the signature.
//
//	func handleWebhook(secret string) http.Handler {
//		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
//			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
//			if err != nil {
//				http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
//				return
//			}
//			if err := webhook.Verify(secret, r.Header, body, 0); err != nil {
//				http.Error(w, "invalid signature", http.StatusBadRequest)
//				return
//			}
//			// body is the event object; r.Header.Get("webhook-id") is its id.
//			w.WriteHeader(http.StatusNoContent)
//		})
//	}
//
// Senders use Sign, or SignAll for the header value while two secrets are
// valid, and NewSecret to make a secret.
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a delivery, as the Standard Webhooks specification names them.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// DefaultTolerance is how far a delivery's timestamp may be from the
// receiver's clock, either way, when Verify is given a tolerance of zero.
const DefaultTolerance = 5 * time.Minute

// SecretPrefix starts every secret agentapi shows; base64 follows it.
const SecretPrefix = "whsec_"

// secretBytes is how many random bytes NewSecret draws: 256 bits, inside the
// specification's 24 to 64 bytes.
const secretBytes = 32

// The errors Verify, Sign and SignAll return, for errors.Is. Any error from
// Verify means the delivery must not be trusted.
var (
	// ErrInvalidSecret: the secret is empty or not base64 after "whsec_".
	ErrInvalidSecret = errors.New("webhook: invalid secret")
	// ErrMissingHeaders: webhook-id, webhook-timestamp or webhook-signature is absent or empty.
	ErrMissingHeaders = errors.New("webhook: missing required headers")
	// ErrInvalidTimestamp: webhook-timestamp is not a whole number of Unix seconds.
	ErrInvalidTimestamp = errors.New("webhook: invalid webhook-timestamp")
	// ErrTimestampTooOld: the timestamp is further in the past than the tolerance.
	ErrTimestampTooOld = errors.New("webhook: timestamp too old")
	// ErrTimestampTooNew: the timestamp is further in the future than the tolerance.
	ErrTimestampTooNew = errors.New("webhook: timestamp too new")
	// ErrNoMatchingSignature: no v1 signature in webhook-signature matches the body.
	ErrNoMatchingSignature = errors.New("webhook: no matching signature")
	// ErrInvalidMessageID: Sign was given an empty id or one with a '.', which
	// would make the signed content ambiguous.
	ErrInvalidMessageID = errors.New("webhook: invalid message id")
)

// Verify checks a delivery: the headers are all present, the timestamp is
// within tolerance of now (DefaultTolerance when tolerance is zero or
// negative), and one of the v1 signatures in webhook-signature is the
// HMAC-SHA256 of "{id}.{timestamp}.{body}" under the secret. Signatures of
// other versions (v1a, v2, …) are skipped. The comparison is constant-time.
// It returns nil only for a delivery to trust.
func Verify(secret string, header http.Header, body []byte, tolerance time.Duration) error {
	return verifyAt(time.Now(), secret, header, body, tolerance)
}

// verifyAt is Verify with the clock as a parameter, so tests reach the
// tolerance's edges without waiting.
func verifyAt(now time.Time, secret string, header http.Header, body []byte, tolerance time.Duration) error {
	key, err := decodeSecret(secret)
	if err != nil {
		return err
	}
	id, sigs := headerValue(header, HeaderID), headerValue(header, HeaderSignature)
	rawTS := headerValue(header, HeaderTimestamp)
	if id == "" || rawTS == "" || sigs == "" {
		return ErrMissingHeaders
	}
	ts, err := strconv.ParseInt(rawTS, 10, 64)
	if err != nil {
		return ErrInvalidTimestamp
	}
	if err := checkTimestamp(now, ts, tolerance); err != nil {
		return err
	}
	if !anyMatches(sigs, mac(key, id, ts, body)) {
		return ErrNoMatchingSignature
	}
	return nil
}

// headerValue is header.Get, and also finds a name stored in another case
// (a map built by hand, or by a framework that lower-cases names), as the
// Standard Webhooks libraries for other languages do.
func headerValue(header http.Header, name string) string {
	if v := header.Get(name); v != "" {
		return v
	}
	for k, vs := range header {
		if strings.EqualFold(k, name) && len(vs) > 0 {
			return vs[0]
		}
	}
	return ""
}

// checkTimestamp refuses a timestamp more than tolerance away from now, in
// whole seconds as the header carries them.
func checkTimestamp(now time.Time, ts int64, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	limit := int64(tolerance / time.Second)
	// limit is at most about 9.2e9 s and now a present-day clock, so neither
	// bound overflows, whatever ts a sender wrote.
	nowS := now.Unix()
	if ts < nowS-limit {
		return fmt.Errorf("%w (tolerance %s)", ErrTimestampTooOld, tolerance)
	}
	if ts > nowS+limit {
		return fmt.Errorf("%w (tolerance %s)", ErrTimestampTooNew, tolerance)
	}
	return nil
}

// anyMatches reports whether one of the space-separated "v1,<base64>"
// entries carries want. Every entry is looked at, whatever matched before,
// so the time taken does not tell which entry matched.
func anyMatches(header string, want []byte) bool {
	found := false
	for _, entry := range strings.Fields(header) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.Strict().DecodeString(sig)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			found = true
		}
	}
	return found
}

// Sign returns the webhook-signature value ("v1,<base64>") for one delivery
// attempt: msgID is the webhook-id, ts the webhook-timestamp (its Unix
// seconds are signed), body the exact bytes sent.
func Sign(secret, msgID string, ts time.Time, body []byte) (string, error) {
	key, err := decodeSecret(secret)
	if err != nil {
		return "", err
	}
	if msgID == "" || strings.Contains(msgID, ".") {
		return "", fmt.Errorf("%w: %q", ErrInvalidMessageID, msgID)
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, msgID, ts.Unix(), body)), nil
}

// SignAll returns the webhook-signature value signed with each secret,
// space-separated in the order given: while an endpoint's secret is rotated
// both the new and the old one are valid, and a receiver holding either
// accepts the delivery.
func SignAll(secrets []string, msgID string, ts time.Time, body []byte) (string, error) {
	if len(secrets) == 0 {
		return "", fmt.Errorf("%w: no secret", ErrInvalidSecret)
	}
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		sig, err := Sign(s, msgID, ts, body)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}

// NewSecret returns a new signing secret: "whsec_" and the base64 of 32
// random bytes from crypto/rand.
func NewSecret() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("webhook: random secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// decodeSecret returns the HMAC key a secret stands for: the bytes of the
// base64 after "whsec_" (or of the whole string without the prefix), padded
// or not, as the Standard Webhooks libraries read it.
func decodeSecret(secret string) ([]byte, error) {
	s := strings.TrimPrefix(secret, SecretPrefix)
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil || len(key) == 0 {
		// The secret itself stays out of the message: errors end up in logs.
		return nil, ErrInvalidSecret
	}
	return key, nil
}

// mac is HMAC-SHA256 of "{id}.{ts}.{body}" under key.
func mac(key []byte, id string, ts int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(nil, ts, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}
