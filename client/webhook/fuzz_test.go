package webhook

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzVerify: whatever headers and body arrive, Verify does not panic, and
// it accepts only when the signature header holds the v1 MAC of exactly
// that id, timestamp and body under the secret, with the timestamp within
// tolerance. A genuine signature is accepted, and never for another body.
func FuzzVerify(f *testing.F) {
	key, _ := base64.StdEncoding.DecodeString(vecBareKey)
	f.Add(key, vecMsgID, int64(0), []byte(vecPayload), []byte(`{"test": 2432232315}`), vecSignature)
	f.Add(key, vecMsgID, int64(301), []byte(vecPayload), []byte(vecPayload+" "), vecOtherSigV1+" "+vecOtherSigV2)
	f.Add([]byte{}, "", int64(-301), []byte{}, []byte("x"), "v1,")
	f.Add([]byte("k"), "a.b", int64(1<<62), []byte("{}"), []byte("{} "), "v1,,, v1a,x\tv1,"+strings.Repeat("A", 44))
	f.Fuzz(func(t *testing.T, key []byte, id string, offset int64, body, other []byte, sigHeader string) {
		ts := vecTime.Unix() + offset // wraps around for huge offsets: any int64 will do
		secret := SecretPrefix + base64.StdEncoding.EncodeToString(key)
		checkArbitrary(t, secret, key, id, ts, body, sigHeader)
		genuine := "v1," + base64.StdEncoding.EncodeToString(mac(key, id, ts, body))
		all := sigHeader + " " + genuine
		checkArbitrary(t, secret, key, id, ts, other, all)
		checkOtherBody(t, secret, key, id, ts, body, other, sigHeader)
		err := verifyAt(vecTime, secret, deliveryHeader(id, ts, all), body, 0)
		if want := len(key) > 0 && id != "" && inTolerance(ts); want != (err == nil) {
			t.Fatalf("genuine signature (key %x, id %q, ts %d): %v", key, id, ts, err)
		}
	})
}

// checkArbitrary: Verify accepts only what carries the body's own MAC.
func checkArbitrary(t *testing.T, secret string, key []byte, id string, ts int64, body []byte, sigHeader string) {
	t.Helper()
	if verifyAt(vecTime, secret, deliveryHeader(id, ts, sigHeader), body, 0) != nil {
		return
	}
	want := "v1," + base64.StdEncoding.EncodeToString(mac(key, id, ts, body))
	if len(key) == 0 || id == "" || !inTolerance(ts) || !slices.Contains(strings.Fields(sigHeader), want) {
		t.Fatalf("accepted body %q (id %q, ts %d) with signatures %q, want only %q", body, id, ts, sigHeader, want)
	}
}

// checkOtherBody: a genuine signature for body does not make Verify accept
// another body (unless the fuzzer's own header already signed that one).
func checkOtherBody(t *testing.T, secret string, key []byte, id string, ts int64, body, other []byte, sigHeader string) {
	t.Helper()
	if bytes.Equal(body, other) {
		return
	}
	genuine := "v1," + base64.StdEncoding.EncodeToString(mac(key, id, ts, body))
	if verifyAt(vecTime, secret, deliveryHeader(id, ts, genuine+" "+sigHeader), other, 0) != nil {
		return
	}
	if !slices.Contains(strings.Fields(sigHeader), "v1,"+base64.StdEncoding.EncodeToString(mac(key, id, ts, other))) {
		t.Fatalf("the signature of %q accepted for %q", body, other)
	}
}

func inTolerance(ts int64) bool {
	now := vecTime.Unix()
	limit := int64(DefaultTolerance.Seconds())
	return ts >= now-limit && ts <= now+limit
}

func deliveryHeader(id string, ts int64, sigs string) http.Header {
	return http.Header{
		"Webhook-Id":        {id},
		"Webhook-Timestamp": {strconv.FormatInt(ts, 10)},
		"Webhook-Signature": {sigs},
	}
}
