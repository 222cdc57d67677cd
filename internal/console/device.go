package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentapi/agentapi/internal/store"
)

// The device cookie says "this browser signed in as this email before". It
// exempts the browser from the per-email sign-in ceiling (never from the
// per-address ones, and never from the password), so that someone who
// knows an Owner's email cannot lock the Owner out by failing on purpose.
const (
	deviceCookie = "agentapi_device"
	deviceTTL    = 365 * 24 * time.Hour
	// deviceSecret names the server secret (in the store, shared by every
	// instance) that signs device cookies.
	deviceSecret = "console-device"
	// maxDeviceCookie bounds what is parsed: an email of 254 bytes, encoded,
	// with its expiry and MAC.
	maxDeviceCookie = 512
)

// serverKey is a key kept as a server secret in the store (shared by every
// instance), read on first use.
type serverKey struct {
	name string
	mu   sync.Mutex
	key  []byte
}

func (k *serverKey) get(ctx context.Context, st *store.Store) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key == nil {
		v, err := st.Secret(ctx, k.name)
		if err != nil {
			return nil, fmt.Errorf("server secret %s: %w", k.name, err)
		}
		k.key = v
	}
	return k.key, nil
}

func deviceMAC(key []byte, email string, expires int64) []byte {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "agentapi console device\x00%d\x00%s", expires, email)
	return m.Sum(nil)
}

// setDeviceCookie marks this browser as one that signed in as email. Without
// the key (the store failing) the sign-in still succeeds, unmarked.
func (c *Console) setDeviceCookie(w http.ResponseWriter, r *http.Request, email string) {
	key, err := c.deviceKey.get(r.Context(), c.Store)
	if err != nil {
		c.Log.Warn("device cookie not set", "err", err)
		return
	}
	expires := c.Now().Add(deviceTTL).Unix()
	b64 := base64.RawURLEncoding
	value := strconv.FormatInt(expires, 10) + "." + b64.EncodeToString([]byte(email)) + "." + b64.EncodeToString(deviceMAC(key, email, expires))
	setCookie(w, r, deviceCookie, value, deviceTTL)
}

// knownDevice reports whether the request carries a device cookie, signed
// by this service and not expired, for email. Anything else, including a
// store failure, is "no": the per-email ceiling then applies.
func (c *Console) knownDevice(r *http.Request, email string) bool {
	ck, err := r.Cookie(deviceCookie)
	if err != nil || len(ck.Value) > maxDeviceCookie {
		return false
	}
	parts := strings.Split(ck.Value, ".")
	if len(parts) != 3 {
		return false
	}
	expires, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || c.Now().Unix() >= expires {
		return false
	}
	b64 := base64.RawURLEncoding
	got, err1 := b64.DecodeString(parts[1])
	mac, err2 := b64.DecodeString(parts[2])
	if err1 != nil || err2 != nil || string(got) != email {
		return false
	}
	key, err := c.deviceKey.get(r.Context(), c.Store)
	if err != nil {
		c.Log.Warn("device cookie not checked", "err", err)
		return false
	}
	return hmac.Equal(mac, deviceMAC(key, email, expires))
}
