package console

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/fresh"
	"github.com/agentapi/agentapi/internal/keys"
)

// A new credential is shown once, on a page of its own: creating or
// rotating a key answers 303 to /console/developers/keys/{id}/created, so
// that a reload is a harmless GET, not a second key (redirect after POST).
//
// The credential travels from the POST to that GET in a cookie sealed with
// AES-256-GCM under a server secret (in the store, shared by every
// instance, so any instance behind the balancer can open it), rather than
// in a store row: nothing to migrate or sweep, and nothing of it stays on
// the server at all. The cookie is HttpOnly, SameSite=Strict, Secure when
// the browser came over TLS, scoped to that one page's path, lives
// revealTTL, and is cleared by the page that shows it; the sealed value
// holds its own expiry and is bound (as GCM's additional data) to the key
// and to the session that made it, so it opens nowhere else. The
// credential is never in a URL, a log, or anything readable later in
// plaintext.
const (
	revealCookie = "agentapi_reveal"
	revealTTL    = 10 * time.Minute
	// revealSecret names the server secret that seals reveal cookies.
	revealSecret = "console-reveal"
	// maxRevealCookie bounds what is decoded: a credential is 60 bytes.
	maxRevealCookie = 256
	// revealClaim prefixes the store claim of a seal's one showing.
	revealClaim = "console-reveal:"
)

func revealPath(keyID string) string {
	return "/console/developers/keys/" + url.PathEscape(keyID) + "/created"
}

// revealAD binds a sealed credential to its key and its session.
func revealAD(keyID string, s *session) []byte {
	ad := append([]byte("agentapi console reveal\x00"), keyID...)
	ad = append(ad, 0)
	return append(ad, s.tokenHash...)
}

func (c *Console) revealAEAD(ctx context.Context) (cipher.AEAD, error) {
	key, err := c.revealKey.get(ctx, c.Store)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("reveal cipher: %w", err)
	}
	return cipher.NewGCM(block)
}

// reveal seals created's credential into the reveal cookie and sends the
// browser to the page that shows it (with mirrorWarning when the write rep
// watched could not raise the mirror).
func (c *Console) reveal(w http.ResponseWriter, r *http.Request, s *session, created keys.Created, rep *fresh.Report) error {
	if err := c.sealReveal(w, r, s, created.Key.ID, revealPath(created.Key.ID), created.Credential); err != nil {
		// The key exists; its credential cannot be shown. Say so rather
		// than pretend nothing happened: the user revokes it and tries again.
		return fmt.Errorf("seal the credential of key %s (made, not shown): %w", created.Key.ID, err)
	}
	return seeOther(mirrorTarget(rep, revealPath(created.Key.ID)))
}

// sealReveal seals secret, bound to id and s, into the reveal cookie of
// the page at path (a key's or a webhook endpoint's) for revealTTL.
func (c *Console) sealReveal(w http.ResponseWriter, r *http.Request, s *session, id, path, secret string) error {
	aead, err := c.revealAEAD(r.Context())
	if err != nil {
		return err
	}
	plain := binary.BigEndian.AppendUint64(nil, uint64(c.Now().Add(revealTTL).Unix()))
	plain = append(plain, secret...)
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails (Go 1.24+)
	sealed := aead.Seal(nonce, nonce, plain, revealAD(id, s))
	// Claims of seals that expired can go (Claim stamps the wall clock).
	if err := c.Store.DeleteClaims(r.Context(), revealClaim, time.Now().Add(-revealTTL)); err != nil {
		c.Log.Warn("delete reveal claims", "err", err)
	}
	setRevealCookie(w, r, path, base64.RawURLEncoding.EncodeToString(sealed), revealTTL)
	return nil
}

// revealed opens the request's reveal cookie for keyID (a key's or a
// webhook endpoint's id): the credential and the name of its one showing (a store claim, by the
// seal's nonce), or "" when there is none to show (expired, another
// session's or key's, or not sealed by this service).
func (c *Console) revealed(r *http.Request, s *session, keyID string) (cred, once string, err error) {
	ck, err := r.Cookie(revealCookie)
	if err != nil || len(ck.Value) > maxRevealCookie {
		return "", "", nil
	}
	sealed, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil {
		return "", "", nil
	}
	aead, err := c.revealAEAD(r.Context())
	if err != nil || len(sealed) < aead.NonceSize() {
		return "", "", err
	}
	nonce := sealed[:aead.NonceSize()]
	plain, err := aead.Open(nil, nonce, sealed[aead.NonceSize():], revealAD(keyID, s))
	if err != nil || len(plain) < 8 || c.Now().Unix() >= int64(binary.BigEndian.Uint64(plain)) {
		return "", "", nil
	}
	return string(plain[8:]), revealClaim + hex.EncodeToString(nonce), nil
}

// setRevealCookie sets the reveal cookie for the page at path that shows
// it, SameSite=Strict; a negative maxAge deletes it.
func setRevealCookie(w http.ResponseWriter, r *http.Request, path, value string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: revealCookie, Value: value, Path: path, MaxAge: int(maxAge.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r)})
}

// handleCreated shows a key's new credential, once; without one to show
// (a reload, a bookmark, a history entry, the cookie sent again) it is the
// key's page. The cookie is cleared by the browser, and its seal claimed
// in the store (shared by every instance) just before the page is shown,
// so a copy of the cookie replayed within revealTTL shows nothing; if
// anything fails before, a reload tries again.
func (c *Console) handleCreated(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := c.keyRow(r.Context(), s.user.AccountID, r.PathValue("id"))
	if err != nil {
		return err
	}
	cred, once, err := c.revealed(r, s, k.ID)
	if err != nil {
		return err
	}
	if cred == "" {
		setRevealCookie(w, r, revealPath(k.ID), "", -time.Second)
		return seeOther("/console/developers/keys/" + url.PathEscape(k.ID))
	}
	p := createdPage{Key: k, Credential: cred, APIBase: apiBase(r)}
	title := "Key created"
	if k.RotatedFrom != "" {
		old, err := c.keyRow(r.Context(), s.user.AccountID, k.RotatedFrom)
		switch {
		case err == nil:
			p.Old, title = &old, "Key rotated"
		case !domain.IsCode(err, domain.CodeNotFound):
			return err
		}
	}
	setRevealCookie(w, r, revealPath(k.ID), "", -time.Second)
	first, err := c.Store.Claim(r.Context(), once)
	if err != nil {
		return err
	}
	if !first {
		return seeOther("/console/developers/keys/" + url.PathEscape(k.ID))
	}
	return c.render(w, r, s, http.StatusOK, "created", title, p)
}

// apiBase is the API's address as the browser reached the console: the
// same server answers /v1 (docs/console.md, Create key: the curl line).
func apiBase(r *http.Request) string {
	scheme := "http"
	if overTLS(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
