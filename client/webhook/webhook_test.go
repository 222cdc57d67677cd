package webhook

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The Standard Webhooks specification's test vectors, verbatim from its
// libraries' tests (libraries/go/webhook_test.go, libraries/python/tests/
// test_webhooks.py, libraries/javascript/src/webhook.test.ts in
// github.com/standard-webhooks/standard-webhooks).
const (
	vecSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vecBareKey   = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vecMsgID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vecTimestamp = 1614265330
	vecPayload   = `{"test": 2432232314}`
	vecSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

	// Signatures the libraries' tests expect to be refused.
	vecOtherSigV1 = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
	vecOtherSigV2 = "v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
	vecNearMiss   = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="
	vecGarbage    = "v1,dawfeoifkpqwoekfpqoekf"
)

var vecTime = time.Unix(vecTimestamp, 0)

// vecHeader is the delivery's headers as the vectors give them.
func vecHeader() http.Header {
	h := http.Header{}
	h.Set(HeaderID, vecMsgID)
	h.Set(HeaderTimestamp, strconv.Itoa(vecTimestamp))
	h.Set(HeaderSignature, vecSignature)
	return h
}

func TestSignReproducesTheSpecificationVector(t *testing.T) {
	for _, secret := range []string{vecSecret, vecBareKey} {
		got, err := Sign(secret, vecMsgID, vecTime, []byte(vecPayload))
		if err != nil {
			t.Fatalf("Sign(%q): %v", secret, err)
		}
		if got != vecSignature {
			t.Errorf("Sign(%q) = %q, want %q", secret, got, vecSignature)
		}
	}
	// Only the whole seconds are signed, as the header carries them.
	got, err := Sign(vecSecret, vecMsgID, vecTime.Add(999*time.Millisecond), []byte(vecPayload))
	if err != nil || got != vecSignature {
		t.Errorf("Sign with a fraction of a second = %q, %v; want %q", got, err, vecSignature)
	}
}

type verifyCase struct {
	name   string
	secret string
	edit   func(h http.Header)
	body   string
	now    time.Time
	tol    time.Duration
	want   error // nil: accepted
}

func (c verifyCase) run(t *testing.T) {
	t.Helper()
	h := vecHeader()
	if c.edit != nil {
		c.edit(h)
	}
	secret, body, now := c.secret, c.body, c.now
	if secret == "" {
		secret = vecSecret
	}
	if body == "" {
		body = vecPayload
	}
	if now.IsZero() {
		now = vecTime
	}
	err := verifyAt(now, secret, h, []byte(body), c.tol)
	if c.want == nil && err != nil {
		t.Fatalf("verify: %v, want it accepted", err)
	}
	if c.want != nil && !errors.Is(err, c.want) {
		t.Fatalf("verify: %v, want %v", err, c.want)
	}
}

func setHeader(name, value string) func(http.Header) {
	return func(h http.Header) { h.Set(name, value) }
}

func delHeader(name string) func(http.Header) {
	return func(h http.Header) { h.Del(name) }
}

func TestVerifyAgainstTheSpecificationVectors(t *testing.T) {
	cases := []verifyCase{
		{name: "valid", want: nil},
		{name: "valid with a bare base64 secret", secret: vecBareKey},
		{name: "missing id", edit: delHeader(HeaderID), want: ErrMissingHeaders},
		{name: "missing timestamp", edit: delHeader(HeaderTimestamp), want: ErrMissingHeaders},
		{name: "missing signature", edit: delHeader(HeaderSignature), want: ErrMissingHeaders},
		{name: "empty id", edit: setHeader(HeaderID, ""), want: ErrMissingHeaders},
		{name: "invalid timestamp", edit: setHeader(HeaderTimestamp, "hello"), want: ErrInvalidTimestamp},
		{name: "fractional timestamp", edit: setHeader(HeaderTimestamp, "1614265330.5"), want: ErrInvalidTimestamp},
		{name: "invalid signature", edit: setHeader(HeaderSignature, vecOtherSigV1), want: ErrNoMatchingSignature},
		{name: "signature one character off", edit: setHeader(HeaderSignature, vecNearMiss), want: ErrNoMatchingSignature},
		{name: "signature not base64", edit: setHeader(HeaderSignature, vecGarbage), want: ErrNoMatchingSignature},
		{name: "partial signature", edit: setHeader(HeaderSignature, vecSignature[:8]), want: ErrNoMatchingSignature},
		{name: "empty v1 signature", edit: setHeader(HeaderSignature, "v1,"), want: ErrNoMatchingSignature},
		{name: "no version", edit: setHeader(HeaderSignature, strings.TrimPrefix(vecSignature, "v1,")), want: ErrNoMatchingSignature},
		{name: "the right MAC under v2", edit: setHeader(HeaderSignature, "v2,"+strings.TrimPrefix(vecSignature, "v1,")), want: ErrNoMatchingSignature},
		{name: "the right MAC under v1a", edit: setHeader(HeaderSignature, "v1a,"+strings.TrimPrefix(vecSignature, "v1,")), want: ErrNoMatchingSignature},
		{name: "the right MAC under V1", edit: setHeader(HeaderSignature, "V1,"+strings.TrimPrefix(vecSignature, "v1,")), want: ErrNoMatchingSignature},
		{name: "multiple signatures, one valid", edit: setHeader(HeaderSignature, strings.Join([]string{vecOtherSigV1, vecOtherSigV2, vecSignature, vecOtherSigV1}, " ")), want: nil},
		{name: "multiple signatures, none valid", edit: setHeader(HeaderSignature, vecOtherSigV1+" "+vecOtherSigV2+" "+vecNearMiss), want: ErrNoMatchingSignature},
		{name: "wrong secret", secret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("another secret of 24 byte")), want: ErrNoMatchingSignature},
		{name: "tampered body", body: `{"test": 2432232315}`, want: ErrNoMatchingSignature},
		{name: "body with a trailing newline", body: vecPayload + "\n", want: ErrNoMatchingSignature},
		{name: "tampered id", edit: setHeader(HeaderID, "msg_p5jXN8AQM9LWM0D4loKWxJel"), want: ErrNoMatchingSignature},
		{name: "tampered timestamp", edit: setHeader(HeaderTimestamp, strconv.Itoa(vecTimestamp+1)), want: ErrNoMatchingSignature},
		{name: "too old by one second", now: vecTime.Add(DefaultTolerance + time.Second), want: ErrTimestampTooOld},
		{name: "too new by one second", now: vecTime.Add(-DefaultTolerance - time.Second), want: ErrTimestampTooNew},
		{name: "exactly the tolerance old", now: vecTime.Add(DefaultTolerance), want: nil},
		{name: "exactly the tolerance new", now: vecTime.Add(-DefaultTolerance), want: nil},
		{name: "timestamp of 2000", edit: setHeader(HeaderTimestamp, "946684800"), want: ErrTimestampTooOld},
		{name: "negative tolerance means the default", now: vecTime.Add(DefaultTolerance + time.Second), tol: -time.Hour, want: ErrTimestampTooOld},
		{name: "wider tolerance accepts", now: vecTime.Add(9 * time.Minute), tol: 10 * time.Minute, want: nil},
		{name: "narrower tolerance refuses", now: vecTime.Add(31 * time.Second), tol: 30 * time.Second, want: ErrTimestampTooOld},
		{name: "smallest timestamp", edit: setHeader(HeaderTimestamp, "-9223372036854775808"), want: ErrTimestampTooOld},
		{name: "largest timestamp", edit: setHeader(HeaderTimestamp, "9223372036854775807"), want: ErrTimestampTooNew},
		{name: "invalid secret", secret: "whsec_not base64!", want: ErrInvalidSecret},
		{name: "empty secret after the prefix", secret: "whsec_", want: ErrInvalidSecret},
	}
	for _, c := range cases {
		t.Run(c.name, c.run)
	}
}

func TestVerifyFindsHeadersInAnyCase(t *testing.T) {
	lower := http.Header{
		"webhook-id":        {vecMsgID},
		"webhook-timestamp": {strconv.Itoa(vecTimestamp)},
		"webhook-signature": {vecSignature},
	}
	if err := verifyAt(vecTime, vecSecret, lower, []byte(vecPayload), 0); err != nil {
		t.Fatalf("lower-case header names: %v", err)
	}
}

func TestVerifyUsesTheClock(t *testing.T) {
	// The vectors' timestamp is years old: Verify (not verifyAt) must say so.
	err := Verify(vecSecret, vecHeader(), []byte(vecPayload), 0)
	if !errors.Is(err, ErrTimestampTooOld) {
		t.Fatalf("Verify of a 2021 delivery: %v, want ErrTimestampTooOld", err)
	}
	now := time.Now()
	sig, err := Sign(vecSecret, vecMsgID, now, []byte(vecPayload))
	if err != nil {
		t.Fatal(err)
	}
	h := vecHeader()
	h.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(HeaderSignature, sig)
	if err := Verify(vecSecret, h, []byte(vecPayload), 0); err != nil {
		t.Fatalf("Verify of a delivery signed now: %v", err)
	}
}

func TestSignRefuses(t *testing.T) {
	cases := []struct {
		name, secret, id string
		want             error
	}{
		{"empty secret", "", vecMsgID, ErrInvalidSecret},
		{"prefix only", "whsec_", vecMsgID, ErrInvalidSecret},
		{"not base64", "whsec_s3cr3t-value!", vecMsgID, ErrInvalidSecret},
		{"empty id", vecSecret, "", ErrInvalidMessageID},
		{"id with a dot", vecSecret, "evt_1.1614265330", ErrInvalidMessageID},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Sign(c.secret, c.id, vecTime, []byte(vecPayload))
			if !errors.Is(err, c.want) {
				t.Fatalf("Sign: %v, want %v", err, c.want)
			}
			if c.secret != "" && c.secret != "whsec_" && strings.Contains(err.Error(), c.secret) {
				t.Fatalf("the error %q shows the secret", err)
			}
		})
	}
}

func TestSignAllSignsWithEverySecret(t *testing.T) {
	newer, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	got, err := SignAll([]string{newer, vecSecret}, vecMsgID, vecTime, []byte(vecPayload))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(got, " ")
	if len(parts) != 2 || parts[1] != vecSignature {
		t.Fatalf("SignAll = %q, want two signatures, the second %q", got, vecSignature)
	}
	h := vecHeader()
	h.Set(HeaderSignature, got)
	for _, s := range []string{newer, vecSecret} {
		if err := verifyAt(vecTime, s, h, []byte(vecPayload), 0); err != nil {
			t.Errorf("a receiver holding one of the secrets: %v", err)
		}
	}
	third, _ := NewSecret()
	if err := verifyAt(vecTime, third, h, []byte(vecPayload), 0); !errors.Is(err, ErrNoMatchingSignature) {
		t.Errorf("a receiver holding neither secret: %v, want ErrNoMatchingSignature", err)
	}
}

func TestSignAllRefuses(t *testing.T) {
	if _, err := SignAll(nil, vecMsgID, vecTime, nil); !errors.Is(err, ErrInvalidSecret) {
		t.Errorf("no secrets: %v, want ErrInvalidSecret", err)
	}
	if _, err := SignAll([]string{vecSecret, "whsec_!"}, vecMsgID, vecTime, nil); !errors.Is(err, ErrInvalidSecret) {
		t.Errorf("one bad secret: %v, want ErrInvalidSecret", err)
	}
}

func TestNewSecret(t *testing.T) {
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSecret()
	if a == b {
		t.Fatalf("two secrets are the same: %q", a)
	}
	if !strings.HasPrefix(a, SecretPrefix) {
		t.Fatalf("secret %q lacks %q", a, SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, SecretPrefix))
	if err != nil || len(key) != 32 {
		t.Fatalf("secret decodes to %d bytes (%v), want 32", len(key), err)
	}
	// A receiver that dropped the padding still verifies, as the Standard
	// Webhooks libraries accept unpadded base64.
	sig, _ := Sign(a, vecMsgID, vecTime, []byte(vecPayload))
	h := vecHeader()
	h.Set(HeaderSignature, sig)
	if err := verifyAt(vecTime, strings.TrimRight(a, "="), h, []byte(vecPayload), 0); err != nil {
		t.Fatalf("unpadded secret: %v", err)
	}
}
