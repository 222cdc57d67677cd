package credential

import (
	"hash/crc32"
	"net/url"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
)

func TestGenerateParseRoundTrip(t *testing.T) {
	seen := map[byte]bool{}
	for range 2000 {
		for _, env := range []domain.Env{domain.EnvLive, domain.EnvTest} {
			generateParseRoundTripOnce(t, env, seen)
		}
	}
	if len(seen) != 62 {
		t.Fatalf("random part used %d of 62 characters", len(seen))
	}
}

// generateParseRoundTripOnce generates a credential for env, checks its
// shape and that Parse gives it back, and marks its secret's random
// characters in seen.
func generateParseRoundTripOnce(t *testing.T, env domain.Env, seen map[byte]bool) {
	t.Helper()
	c, err := Generate(env)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Text) != 4+5+12+1+38 || !strings.HasPrefix(c.Text, "agk_"+string(env)+"_"+c.Prefix+"_") {
		t.Fatalf("shape of %q", c.Text)
	}
	if strings.Count(c.Text, "_") != 3 {
		t.Fatalf("a segment contains _: %q", c.Text)
	}
	p, err := Parse(c.Text)
	if err != nil || p != c {
		t.Fatalf("Parse(%q) = %+v, %v", c.Text, p, err)
	}
	for i := len(c.Text) - SecretLen; i < len(c.Text)-ChecksumLen; i++ {
		seen[c.Text[i]] = true
	}
}

func TestChecksumIsCRC32InBase62(t *testing.T) {
	body := "agk_live_abcdefghijkl_0123456789ABCDEFGHIJKLMNOPQRSTUV"
	// Computed independently: CRC32 IEEE, then base62 digits, most significant first.
	sum := crc32.ChecksumIEEE([]byte(body))
	digits := []byte{}
	for range 6 {
		digits = append([]byte{"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"[sum%62]}, digits...)
		sum /= 62
	}
	if got := Checksum(body); got != string(digits) {
		t.Fatalf("Checksum = %q, want %q", got, digits)
	}
	if _, err := Parse(body + string(digits)); err != nil {
		t.Fatalf("known-good credential refused: %v", err)
	}
}

func TestParseRefuses(t *testing.T) {
	c, _ := Generate(domain.EnvLive)
	good := c.Text
	swap := func(i int, b byte) string { s := []byte(good); s[i] = b; return string(s) }
	cases := map[string]string{
		"empty":            "",
		"wrong tag":        "agx" + good[3:],
		"unknown env":      strings.Replace(good, "_live_", "_prod_", 1),
		"upper prefix":     swap(9, 'A'),
		"prefix symbol":    swap(10, '-'),
		"short":            good[:len(good)-1],
		"long":             good + "0",
		"secret symbol":    swap(30, '+'),
		"bad checksum":     swap(len(good)-1, flipChar(good[len(good)-1])),
		"changed secret":   swap(25, flipChar(good[25])),
		"changed prefix":   swap(12, flipChar2(good[12])),
		"trailing space":   good[:len(good)-1] + " ",
		"leading space":    " " + good[1:],
		"extra underscore": good[:20] + "_" + good[21:],
		"unicode":          strings.Replace(good, good[30:32], "é", 1),
		"bearer included":  "Bearer " + good,
	}
	for name, text := range cases {
		if _, err := Parse(text); err != ErrMalformed {
			t.Errorf("%s: Parse(%q) = %v, want ErrMalformed", name, text, err)
		}
	}
}

func flipChar(c byte) byte {
	if c == 'a' {
		return 'b'
	}
	return 'a'
}

func flipChar2(c byte) byte {
	if c == '0' {
		return '1'
	}
	return '0'
}

func TestParseBearer(t *testing.T) {
	for header, want := range map[string]string{
		"Bearer x": "x", "bearer x": "x", "BEARER x": "x", "Bearer   x": "x",
		"Bearer": "", "Bearer ": "", "Basic x": "", "Bearerx": "", "Bearer  x y": "", "Bearer x\t": "",
		"": "", "Bearer\tx": "", "Token x": "",
	} {
		got, ok := ParseBearer(header)
		if got != want || ok != (want != "") {
			t.Errorf("ParseBearer(%q) = %q, %v; want %q", header, got, ok, want)
		}
	}
}

func TestEqual(t *testing.T) {
	c, _ := Generate(domain.EnvTest)
	// The second text ends in 'x' on every run: the mismatch must differ
	// from the text whatever its last character is.
	for _, text := range []string{c.Text, c.Text[:len(c.Text)-1] + "x"} {
		h := Hash(text)
		if !Equal(h[:], text) {
			t.Fatalf("own hash does not match %q", text)
		}
		last := byte('x')
		if text[len(text)-1] == last {
			last = 'y'
		}
		mismatch := text[:len(text)-1] + string(last)
		if Equal(h[:], mismatch) || Equal(h[:31], text) || Equal(nil, text) || Equal(DummyHash[:], text) {
			t.Fatalf("Equal accepted a mismatch of %q", text)
		}
	}
}

func TestRedact(t *testing.T) {
	c, _ := Generate(domain.EnvLive)
	r := Redact(c.Text)
	if r != "agk_live_"+c.Prefix+"_…" || strings.Contains(r, c.Text[len(c.Text)-38:len(c.Text)-30]) {
		t.Fatalf("Redact = %q", r)
	}
	if Redact("hello") != "" || Redact("agk_LIVE_xxxxxxxxxxxx") != "" {
		t.Fatal("Redact of a non-credential")
	}
	// Without the "_" that ends a prefix, the twelve characters after the
	// env may be a secret's: nothing of them is shown.
	secret := c.Text[len(c.Text)-SecretLen:]
	for _, text := range []string{
		"agk_live_" + strings.ToLower(secret),                          // a secret alone after the env
		"agk_live_" + c.Prefix,                                         // a prefix and nothing after it
		"agk_live_" + c.Prefix + strings.ToLower(secret),               // no separator
		"agk_live" + c.Prefix + "_" + secret,                           // no separator after the env
		"agk_live_" + c.Prefix[:6] + "_" + c.Prefix[7:] + "_" + secret, // a "_" inside the prefix
	} {
		if r := Redact(text); r != "" {
			t.Errorf("Redact(%q) = %q; want \"\"", text, r)
		}
	}
}

// TestRedactText: a credential anywhere in a method, path, query or header
// value, in any case, glued to other text, is shown as its public prefix.
func TestRedactText(t *testing.T) {
	c, _ := Generate(domain.EnvLive)
	pub := "agk_live_" + c.Prefix + "_…"
	secret := c.Text[len(c.Text)-SecretLen:]
	for in, want := range map[string]string{
		c.Text:                  "" + pub,
		strings.ToUpper(c.Text): pub,
		"x" + c.Text:            "x" + pub,
		"/v1/AI-AGENTS/" + strings.ToUpper(c.Text) + "/x": "/v1/AI-AGENTS/" + pub + "/x",
		"a=" + c.Text + "&b=" + c.Text:                    "a=" + pub + "&b=" + pub,
		"agk_live_" + secret + "!":                        "agk_[redacted]!",
		"AgK_" + secret:                                   "agk_[redacted]",
		"the format agk_<env>_…":                          "the format agk_<env>_…",
		"plain text":                                      "plain text",
	} {
		got := RedactText(in)
		if got != want {
			t.Errorf("RedactText(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(strings.ToLower(got), strings.ToLower(secret[:16])) {
			t.Errorf("RedactText(%q) shows the secret", in)
		}
	}
}

func FuzzParse(f *testing.F) {
	c, _ := Generate(domain.EnvLive)
	f.Add(c.Text)
	f.Add("agk_test_000000000000_" + strings.Repeat("A", 38))
	f.Add("")
	f.Add("agk_live__")
	f.Fuzz(func(t *testing.T, text string) {
		p, err := Parse(text)
		if err != nil {
			if err != ErrMalformed {
				t.Fatalf("error %v", err)
			}
			return
		}
		// Success implies the exact shape and a valid checksum.
		rebuilt := "agk_" + string(p.Env) + "_" + p.Prefix + "_" + text[len(text)-SecretLen:]
		if rebuilt != text || p.Text != text {
			t.Fatalf("%q rebuilt as %q", text, rebuilt)
		}
		if Checksum(text[:len(text)-ChecksumLen]) != text[len(text)-ChecksumLen:] {
			t.Fatalf("accepted a wrong checksum: %q", text)
		}
		// Any single-character change of an accepted credential is refused,
		// unless it happens to land on another valid checksum (CRC32 catches
		// every single-character change, so it never does).
		for i := range len(text) {
			mut := []byte(text)
			mut[i] ^= 1
			if _, err := Parse(string(mut)); err == nil {
				t.Fatalf("one-character change at %d accepted: %q", i, mut)
			}
		}
	})
}

func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"Bearer x", "bearer  abc", "Basic x", "Bearer", "Bearer \x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		tok, ok := ParseBearer(header)
		if !ok {
			return
		}
		if tok == "" || strings.ContainsAny(tok, " \t") || !strings.EqualFold(header[:6], "bearer") || !strings.HasSuffix(header, tok) {
			t.Fatalf("ParseBearer(%q) = %q", header, tok)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	c, _ := Generate(domain.EnvLive)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Parse(c.Text)
	}
}

func BenchmarkParseBearer(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, _ = ParseBearer("Bearer agk_live_abcdefghijkl_0123456789")
	}
}

// encodeAll percent-encodes every byte of s, in the case of hex given.
func encodeAll(s string, upper bool) string {
	hex := "0123456789abcdef"
	if upper {
		hex = "0123456789ABCDEF"
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte('%')
		b.WriteByte(hex[s[i]>>4])
		b.WriteByte(hex[s[i]&15])
	}
	return b.String()
}

// TestRedactTextEncoded: a credential percent-encoded in part or whole,
// once or more, in either case of hex, is shown as RedactText shows it
// decoded; the text around it stays as sent.
func TestRedactTextEncoded(t *testing.T) {
	c, _ := Generate(domain.EnvLive)
	pub := "agk_live_" + c.Prefix + "_…"
	head, secret := c.Text[:len(c.Text)-SecretLen], c.Text[len(c.Text)-SecretLen:]
	underscores := strings.ReplaceAll(c.Text, "_", "%5F")
	for in, want := range map[string]string{
		"/v1/" + underscores: "/v1/" + pub,
		"/v1/" + strings.ReplaceAll(c.Text, "_", "%5f") + "/x": "/v1/" + pub + "/x",
		"/v1/" + encodeAll(c.Text, true):                       "/v1/" + pub,
		"/v1/" + encodeAll(c.Text, false) + "%2F":              "/v1/" + pub + "%2F",
		"/v1/" + head + encodeAll(secret, true):                "/v1/" + pub,
		"/v1/" + strings.ReplaceAll(c.Text, "_", "%255F"):      "/v1/" + pub,
		"/v1/" + strings.ReplaceAll(c.Text, "_", "%25255f"):    "/v1/" + pub,
		"/v1/" + strings.ReplaceAll(c.Text, "_", "%25%35%46"):  "/v1/" + pub,
		"/v1/%4" + underscores:                                 "/v1/%4" + pub,
		"/v1/" + encodeAll("agk_live_", true) + secret:         "/v1/agk_[redacted]",
		"/v1/agk%5F":         "/v1/agk%5F",
		"/v1/100%25/agk%5Fx": "/v1/100%25/agk_[redacted]",
		"/v1/%zz%":           "/v1/%zz%",
	} {
		got := RedactText(in)
		if got != want {
			t.Errorf("RedactText(%q) = %q, want %q", in, got, want)
		}
		if shows(got, secret) {
			t.Errorf("RedactText(%q) shows the secret", in)
		}
	}
}

// shows reports whether text, or text decoded any number of times, holds
// the first 16 characters of secret, in any case.
func shows(text, secret string) bool {
	for range 10 {
		if strings.Contains(strings.ToLower(text), strings.ToLower(secret[:16])) {
			return true
		}
		d, err := url.PathUnescape(text)
		if err != nil {
			d = lenientUnescape(text)
		}
		if d == text {
			return false
		}
		text = d
	}
	return false
}

// lenientUnescape decodes each %XX, leaving any other "%" as it is.
func lenientUnescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// FuzzRedactText: a credential written into any text, each of its
// characters as itself or percent-encoded up to maxDecodings times over
// (the choice and the case of hex fuzzed), never shows its secret in what
// RedactText returns, nor in that decoded any number of times.
func FuzzRedactText(f *testing.F) {
	f.Add("/v1/", "/x", []byte{1, 0, 2, 0, 3}, false)
	f.Add("%4", "", []byte{0}, true)
	f.Add("agk_", "%25", []byte{4, 4, 4, 4}, true)
	f.Add("", "_ABC", []byte{}, false)
	c, _ := Generate(domain.EnvLive)
	secret := c.Text[len(c.Text)-SecretLen:]
	f.Fuzz(func(t *testing.T, before, after string, depths []byte, upper bool) {
		var b strings.Builder
		b.WriteString(before)
		for i := 0; i < len(c.Text); i++ {
			d := 0
			if len(depths) > 0 {
				d = int(depths[i%len(depths)]) % (maxDecodings + 1)
			}
			b.WriteString(encodeTimes(c.Text[i:i+1], d, upper))
		}
		b.WriteString(after)
		in := b.String()
		if got := RedactText(in); shows(got, secret) {
			t.Fatalf("RedactText(%q) = %q shows the secret", in, got)
		}
	})
}

// encodeTimes percent-encodes s n times over: the first time every byte,
// then the "%" of each escape.
func encodeTimes(s string, n int, upper bool) string {
	if n == 0 {
		return s
	}
	s = encodeAll(s, upper)
	for range n - 1 {
		s = strings.ReplaceAll(s, "%", "%25")
	}
	return s
}
