package secretscan_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/secretscan"
	"github.com/agentapi/agentapi/internal/secretscan/secretscantest"
)

type signer = secretscantest.Signer

func newSigner(t *testing.T, id string) signer { return secretscantest.NewSigner(t, id) }

func pemOf(t *testing.T, pub any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func keysJSON(t *testing.T, ss ...signer) []byte { return secretscantest.KeysFile(t, ss...) }

// writeFile replaces path's content and moves its modification time on,
// so that the change shows whatever the file system's clock granularity.
func writeFile(t *testing.T, path string, data []byte, age time.Duration) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(age)
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

func TestVerify(t *testing.T) {
	a, b := newSigner(t, "key-a"), newSigner(t, "key-b")
	path := filepath.Join(t.TempDir(), "keys.json")
	writeFile(t, path, keysJSON(t, a), -time.Hour)
	ks, err := secretscan.LoadKeys(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`[{"token":"x","type":"agentapi_key","url":"https://github.com/o/r/blob/main/x","source":"content"}]`)
	sig := a.Sign(t, body)
	for _, tc := range []struct {
		name     string
		id, sig  string
		body     []byte
		want     error
		accepted bool
	}{
		{"good", "key-a", sig, body, nil, true},
		{"tampered body", "key-a", sig, append([]byte(nil), strings.Replace(string(body), "x", "y", 1)...), secretscan.ErrBadSignature, false},
		{"one byte more", "key-a", sig, append(append([]byte(nil), body...), ' '), secretscan.ErrBadSignature, false},
		{"another key's signature", "key-a", b.Sign(t, body), body, secretscan.ErrBadSignature, false},
		{"unknown key id", "key-b", b.Sign(t, body), body, secretscan.ErrUnknownKey, false},
		{"no key id", "", sig, body, secretscan.ErrUnsigned, false},
		{"no signature", "key-a", "", body, secretscan.ErrUnsigned, false},
		{"not base64", "key-a", "!!" + sig, body, secretscan.ErrBadSignature, false},
		{"not DER", "key-a", base64.StdEncoding.EncodeToString([]byte("signature")), body, secretscan.ErrBadSignature, false},
		{"huge signature", "key-a", strings.Repeat("A", 10000), body, secretscan.ErrBadSignature, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ks.Verify(tc.id, tc.sig, tc.body)
			if tc.accepted != (err == nil) || !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestKeysRotate: every listed key is accepted, current or not; a rewrite
// of the file is read on the next report; a broken rewrite keeps the keys
// last read; a key removed from the file is refused.
func TestKeysRotate(t *testing.T) {
	old, cur := newSigner(t, "old"), newSigner(t, "new")
	path := filepath.Join(t.TempDir(), "keys.json")
	writeFile(t, path, keysJSON(t, old), -2*time.Hour)
	ks, err := secretscan.LoadKeys(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`[]`)
	check := func(s signer, want error) {
		t.Helper()
		if err := ks.Verify(s.ID, s.Sign(t, body), body); !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Fatalf("key %s: Verify = %v, want %v", s.ID, err, want)
		}
	}
	check(old, nil)
	check(cur, secretscan.ErrUnknownKey)

	writeFile(t, path, keysJSON(t, cur, old), -time.Hour) // rotation: new current, old still listed
	check(cur, nil)
	check(old, nil)

	writeFile(t, path, []byte(`{"public_keys": [`), -30*time.Minute) // half written
	check(cur, nil)
	check(old, nil)

	// Replaced by rename, as a deploy tool does, with the old key gone.
	tmp := path + ".tmp"
	writeFile(t, tmp, keysJSON(t, cur), -10*time.Minute)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	check(cur, nil)
	check(old, secretscan.ErrUnknownKey)
}

func TestLoadKeysRefusesBadFiles(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	one := func(id, key string) string {
		b, _ := json.Marshal(map[string]any{"public_keys": []any{map[string]any{"key_identifier": id, "key": key, "is_current": true}}})
		return string(b)
	}
	good := newSigner(t, "g")
	for name, content := range map[string]string{
		"not JSON":    "key",
		"no keys":     `{"public_keys":[]}`,
		"other shape": `[{"key_identifier":"a"}]`,
		"no id":       one("", pemOf(t, &good.Key.PublicKey)),
		"not PEM":     one("a", "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE"),
		"RSA":         one("a", pemOf(t, &rsaKey.PublicKey)),
		"P-384":       one("a", pemOf(t, &p384.PublicKey)),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "keys.json")
			writeFile(t, path, []byte(content), 0)
			if _, err := secretscan.LoadKeys(path, nil); err == nil {
				t.Fatal("loaded")
			}
		})
	}
	if _, err := secretscan.LoadKeys(filepath.Join(t.TempDir(), "absent.json"), nil); err == nil {
		t.Fatal("loaded a file that does not exist")
	}
}

func TestParseReport(t *testing.T) {
	many := func(n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat(`{"token":"t"},`, n), ",") + "]"
	}
	for _, tc := range []struct {
		name, body string
		code       domain.Code
		n          int
	}{
		{"one", `[{"token":"a","type":"agentapi_key","url":"https://x","source":"content"}]`, "", 1},
		{"empty", `[]`, "", 0},
		{"unknown fields kept out", `[{"token":"a","extra":{"deep":[1]}}]`, "", 1},
		{"max", many(secretscan.MaxEntries), "", secretscan.MaxEntries},
		{"one too many", many(secretscan.MaxEntries + 1), domain.CodeInvalidValue, 0},
		{"far too many", many(100000), domain.CodeInvalidValue, 0},
		{"not JSON", `[{"token":`, domain.CodeInvalidJSON, 0},
		{"nothing", ``, domain.CodeInvalidJSON, 0},
		{"trailing data", `[] []`, domain.CodeInvalidJSON, 0},
		{"object", `{"token":"a"}`, domain.CodeDatatypeMismatch, 0},
		{"number token", `[{"token":1}]`, domain.CodeDatatypeMismatch, 0},
		{"entry not an object", `["a"]`, domain.CodeDatatypeMismatch, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es, err := secretscan.ParseReport([]byte(tc.body))
			if tc.code == "" {
				if err != nil || len(es) != tc.n {
					t.Fatalf("ParseReport = %d entries, %v; want %d", len(es), err, tc.n)
				}
				return
			}
			if err == nil || err.Code != tc.code {
				t.Fatalf("ParseReport error %v, want %s", err, tc.code)
			}
		})
	}
}

func TestTokenHash(t *testing.T) {
	// echo -n abc | sha256sum
	if got := secretscan.TokenHash("abc"); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatal(got)
	}
}

// TestCredentialPattern: the regex registered with GitHub matches every
// credential we make, whole, and none of the near-misses; and the page that
// documents it for the registration shows exactly this one.
func TestCredentialPattern(t *testing.T) {
	whole := regexp.MustCompile(`^(?:` + secretscan.CredentialPattern + `)$`)
	var sample string
	for i := range 2000 {
		env := domain.EnvLive
		if i%2 == 1 {
			env = domain.EnvTest
		}
		c, err := credential.Generate(env)
		if err != nil {
			t.Fatal(err)
		}
		if !whole.MatchString(c.Text) {
			t.Fatalf("a generated credential (prefix %s) does not match %s", c.Prefix, secretscan.CredentialPattern)
		}
		sample = c.Text
	}
	head, secret := sample[:21], sample[22:]
	for name, s := range map[string]string{
		"other tag":            "agx" + sample[3:],
		"upper tag":            "AGK" + sample[3:],
		"other env":            "agk_prod" + sample[8:],
		"upper prefix":         head[:9] + strings.ToUpper(head[9:]) + "_" + secret,
		"short prefix":         head[:20] + "_" + secret,
		"long prefix":          head + "a_" + secret,
		"short secret":         head + "_" + secret[1:],
		"long secret":          head + "_" + secret + "A",
		"dash in secret":       head + "_" + secret[:10] + "-" + secret[11:],
		"underscore in prefix": head[:10] + "_" + head[11:] + "_" + secret,
		"no separator":         head + secret,
	} {
		if whole.MatchString(s) {
			t.Errorf("%s: %q matches", name, s[:21])
		}
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "secret-scanning.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "`"+secretscan.CredentialPattern+"`") {
		t.Fatalf("docs/secret-scanning.md does not show the pattern %s", secretscan.CredentialPattern)
	}
}

// FuzzParseReport: whatever the body, ParseReport either refuses it with
// one of the report's codes or returns at most MaxEntries entries, exactly
// those encoding/json reads from it.
func FuzzParseReport(f *testing.F) {
	for _, seed := range []string{`[]`, `[{"token":"a","type":"t","url":"u","source":"s"}]`, `[{"token":1}]`, `{}`, `[] x`, `[null]`, `["a"]`, `[{"TOKEN":"a"}]`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		es, derr := secretscan.ParseReport(body)
		if derr != nil {
			switch derr.Code {
			case domain.CodeInvalidJSON, domain.CodeDatatypeMismatch, domain.CodeInvalidValue:
			default:
				t.Fatalf("code %s", derr.Code)
			}
			return
		}
		if len(es) > secretscan.MaxEntries {
			t.Fatalf("%d entries", len(es))
		}
		var want []secretscan.Entry
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatalf("accepted what encoding/json refuses: %v", err)
		}
		if len(want) != len(es) {
			t.Fatalf("%d entries, encoding/json reads %d", len(es), len(want))
		}
		for i := range es {
			if es[i] != want[i] {
				t.Fatalf("entry %d: %+v, encoding/json reads %+v", i, es[i], want[i])
			}
		}
	})
}

// TestMalleatedSignatureVerifies: ECDSA signatures are malleable, (r, s)
// and (r, n−s) both verify, and Verify accepts both on purpose: GitHub does
// not document that it signs with low S only, so refusing high S could
// refuse a genuine report, and a malleated signature is good for one thing,
// sending the same body again, which the original signature does as well
// and which changes nothing (a report is idempotent; docs/secret-scanning.md,
// Signatures). It does not carry over to another body.
func TestMalleatedSignatureVerifies(t *testing.T) {
	a := newSigner(t, "key-a")
	path := filepath.Join(t.TempDir(), "keys.json")
	writeFile(t, path, keysJSON(t, a), -time.Hour)
	ks, err := secretscan.LoadKeys(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`[{"token":"x","type":"agentapi_key","url":"https://github.com/o/r","source":"content"}]`)
	sig := a.Sign(t, body)
	flipped := malleate(t, sig)
	if flipped == sig {
		t.Fatal("the malleated signature is the original")
	}
	if err := ks.Verify(a.ID, flipped, body); err != nil {
		t.Fatalf("(r, n−s) of a good signature: %v, want it accepted", err)
	}
	if err := ks.Verify(a.ID, flipped, []byte(`[]`)); !errors.Is(err, secretscan.ErrBadSignature) {
		t.Fatalf("(r, n−s) over another body: %v, want ErrBadSignature", err)
	}
}

// malleate is sig (base64 ASN.1 DER (r, s)) as (r, n−s), n the order of P-256.
func malleate(t *testing.T, sig string) string {
	t.Helper()
	der, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		t.Fatal(err)
	}
	var rs struct{ R, S *big.Int }
	if rest, err := asn1.Unmarshal(der, &rs); err != nil || len(rest) != 0 {
		t.Fatalf("signature DER: %v (%d bytes after)", err, len(rest))
	}
	rs.S.Sub(elliptic.P256().Params().N, rs.S)
	out, err := asn1.Marshal(rs)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(out)
}

// TestKeyRemovedInPlace: a key removed from the keys file by rewriting it
// in place (no rename, the modification time as the write left it) is
// refused on the very next report, and a rewrite that does not load keeps
// the keys last read and logs an error naming the file.
func TestKeyRemovedInPlace(t *testing.T) {
	a, b := newSigner(t, "key-a"), newSigner(t, "key-b")
	path := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(path, keysJSON(t, a, b), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	ks, err := secretscan.LoadKeys(path, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`[]`)
	if err := ks.Verify(b.ID, b.Sign(t, body), body); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, keysJSON(t, a), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ks.Verify(b.ID, b.Sign(t, body), body); !errors.Is(err, secretscan.ErrUnknownKey) {
		t.Fatalf("a key removed from the file: %v, want ErrUnknownKey", err)
	}
	if err := os.WriteFile(path, []byte(`{"public_keys": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ks.Verify(a.ID, a.Sign(t, body), body); err != nil {
		t.Fatalf("after a broken rewrite: %v, want the keys last read", err)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR","msg":"secret scanning: keys file changed but does not load`) ||
		!strings.Contains(logs.String(), path) {
		t.Fatalf("log: %s", logs.String())
	}
}

// TestReload: a rewrite in place that keeps the file's size and
// modification time escapes the check made on every report; Reload (serve's
// SIGHUP) reads it at once. A file that does not load keeps the keys last
// read and logs an error.
func TestReload(t *testing.T) {
	a, b, c := newSigner(t, "key-a"), newSigner(t, "key-b"), newSigner(t, "key-c")
	path := filepath.Join(t.TempDir(), "keys.json")
	writeFile(t, path, keysJSON(t, a, b), -time.Hour)
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	ks, err := secretscan.LoadKeys(path, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`[]`)
	verify := func(s signer) error { return ks.Verify(s.ID, s.Sign(t, body), body) }
	writeFile(t, path, keysJSON(t, a, c), 0) // key-b replaced by key-c: the same size
	if err := os.Chtimes(path, before.ModTime(), before.ModTime()); err != nil {
		t.Fatal(err)
	}
	if after, err := os.Stat(path); err != nil || after.Size() != before.Size() {
		t.Fatalf("the rewrite changed the size: %v %v", after, err)
	}
	if err := verify(c); !errors.Is(err, secretscan.ErrUnknownKey) {
		t.Fatalf("before Reload, the unchanged-looking file: %v, want ErrUnknownKey", err)
	}
	ks.Reload()
	if err := verify(c); err != nil {
		t.Fatalf("after Reload, the new key: %v", err)
	}
	if err := verify(b); !errors.Is(err, secretscan.ErrUnknownKey) {
		t.Fatalf("after Reload, the removed key: %v, want ErrUnknownKey", err)
	}
	writeFile(t, path, []byte(`not json`), 0)
	ks.Reload()
	if err := verify(c); err != nil {
		t.Fatalf("after a Reload of a broken file: %v, want the keys last read", err)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR","msg":"secret scanning: keys file does not load; keeping the keys last read"`) {
		t.Fatalf("log: %s", logs.String())
	}
}
