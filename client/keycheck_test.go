package client

import (
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
)

// FuzzCheckKeyAgreesWithParse: the client's local check of a key accepts
// exactly what the server's parser (credential.Parse, the reference)
// accepts, and returns the same public prefix. Each input is also tried
// with its last six characters replaced by the right checksum, so the
// fuzzer explores the format behind the checksum instead of stopping at it.
func FuzzCheckKeyAgreesWithParse(f *testing.F) {
	for _, env := range []domain.Env{domain.EnvLive, domain.EnvTest} {
		for range 3 {
			c, err := credential.Generate(env)
			if err != nil {
				f.Fatal(err)
			}
			for _, s := range nearMisses(c.Text) {
				f.Add(s)
			}
		}
	}
	f.Add("")
	f.Add("agk_")
	f.Add("agk_live_")
	f.Add("agk_live_abcdefghijkl_0123456789abcdefghijABCDEFGHIJ012345")
	f.Fuzz(func(t *testing.T, key string) {
		agree(t, key)
		if len(key) >= credential.ChecksumLen {
			body := key[:len(key)-credential.ChecksumLen]
			agree(t, body+credential.Checksum(body))
		}
	})
}

// TestCheckKeyAgreesWithParseOnNearMisses runs the seeds' cases on every
// test run, with fresh credentials, not only under -fuzz.
func TestCheckKeyAgreesWithParseOnNearMisses(t *testing.T) {
	accepted := 0
	for _, env := range []domain.Env{domain.EnvLive, domain.EnvTest} {
		for range 20 {
			c, err := credential.Generate(env)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range nearMisses(c.Text) {
				if agree(t, s) {
					accepted++
				}
			}
		}
	}
	// Only the generated credentials themselves are valid.
	if accepted != 40 {
		t.Fatalf("%d inputs accepted by both, want the 40 generated credentials", accepted)
	}
}

// agree fails t unless checkKey and credential.Parse both refuse key, or
// both accept it with the same prefix; it reports whether they accepted.
func agree(t *testing.T, key string) bool {
	t.Helper()
	prefix, err := checkKey(key)
	c, perr := credential.Parse(key)
	switch {
	case err == nil && perr != nil:
		t.Fatalf("client accepts %q, the server refuses it: %v", key, perr)
	case err != nil && perr == nil:
		t.Fatalf("client refuses %q, the server accepts it", key)
	case err != nil && err != errKeyForm:
		t.Fatalf("client refuses %q with %v", key, err)
	case err == nil && prefix != c.Prefix:
		t.Fatalf("client prefix %q, server prefix %q for %q", prefix, c.Prefix, key)
	}
	return err == nil
}

// nearMisses returns valid, a generated credential, then variants that
// each break one rule. Where the checksum is not the rule under test it is
// recomputed, so only that rule can refuse the variant.
func nearMisses(valid string) []string {
	const (
		envAt    = len(credential.Tag) + 1             // 4
		prefixAt = envAt + 5                           // 9
		secretAt = prefixAt + credential.PrefixLen + 1 // 22
	)
	body := valid[:len(valid)-credential.ChecksumLen]
	sum := valid[len(valid)-credential.ChecksumLen:]
	resum := func(b string) string { return b + credential.Checksum(b) }
	set := func(s string, i int, c string) string { return s[:i] + c + s[i+len(c):] }
	flip := func(c byte) string {
		if c == '0' {
			return "1"
		}
		return "0"
	}
	return []string{
		valid,
		// The checksum.
		body + sum[:5] + flip(sum[5]),
		body + flip(sum[0]) + sum[1:],
		set(valid, secretAt, flip(valid[secretAt])),
		// The tag and the env.
		resum("AGK" + body[3:]),
		resum("agx" + body[3:]),
		resum(body[:envAt] + "prod" + body[envAt+4:]),
		resum(body[:envAt] + "LIVE" + body[envAt+4:]),
		resum(body[:envAt] + "tst" + body[envAt+3:]),
		// An underscore, or another separator, inside a segment or missing.
		resum(set(body, prefixAt+3, "_")),
		resum(set(body, secretAt+5, "_")),
		resum(set(body, prefixAt+credential.PrefixLen, "-")),
		resum(set(body, envAt+4, "-")),
		resum(set(body, envAt-1, "-")),
		// Wrong lengths: a segment one short or one long, the key cut or extended.
		resum(body[:prefixAt] + body[prefixAt+1:]),
		resum(body[:prefixAt] + "a" + body[prefixAt:]),
		resum(body[:secretAt+1] + body[secretAt+2:]),
		resum(body + "A"),
		resum(body[:len(body)-1]),
		valid[:len(valid)-1],
		valid + "0",
		resum(body[:prefixAt] + body[prefixAt+1:secretAt] + "a" + body[secretAt:]),
		// Characters outside each segment's alphabet.
		resum(set(body, prefixAt, "A")),
		resum(set(body, prefixAt, "-")),
		resum(set(body, secretAt, "+")),
		resum(set(body, secretAt, " ")),
		resum(set(body, secretAt, "\x00")),
		// Non-ASCII, of the same byte length and not, valid UTF-8 and not.
		resum(set(body, prefixAt, "é")),
		resum(set(body, secretAt, "é")),
		resum(set(body, secretAt, "\xff")),
		resum(set(body, secretAt, "\u212a")), // KELVIN SIGN, folds to k
		resum(strings.Replace(body, body[prefixAt:prefixAt+1], "ａ", 1)),
		// Whitespace around a valid key.
		" " + valid,
		valid + "\n",
	}
}
