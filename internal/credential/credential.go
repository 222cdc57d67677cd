// Package credential owns the API key credential format
// `agk_<env>_<prefix>_<secret>`: generation, parsing with its checksum,
// hashing for storage, and constant-time comparison.
package credential

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"hash/crc32"
	"strings"

	"github.com/agentapi/agentapi/internal/domain"
)

// Shape of a credential (docs/api.md, Credential format).
const (
	Tag          = "agk"
	PrefixLen    = 12
	RandomLen    = 32
	ChecksumLen  = 6
	SecretLen    = RandomLen + ChecksumLen
	base62       = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	prefixChars  = "0123456789abcdefghijklmnopqrstuvwxyz"
	envStart     = len(Tag) + 1 // after "agk_"
	maxTextBytes = envStart + 4 + 1 + PrefixLen + 1 + SecretLen
)

// ErrMalformed is every parse failure: callers never reveal which check failed.
var ErrMalformed = errors.New("malformed credential")

// Credential is a parsed credential. Text is the whole string.
type Credential struct {
	Env    domain.Env
	Prefix string
	Text   string
}

// DummyHash is compared against when no key has the presented prefix, so an
// unknown prefix costs what a known one does.
var DummyHash = sha256.Sum256([]byte("agentapi dummy credential"))

// Generate makes a new credential from a CSPRNG.
func Generate(env domain.Env) (Credential, error) {
	if _, ok := domain.ParseEnv(string(env)); !ok {
		return Credential{}, errors.New("credential: env must be live or test")
	}
	buf := append(make([]byte, 0, maxTextBytes), Tag+"_"+string(env)+"_"...)
	prefixStart := len(buf)
	buf = appendRandom(buf, prefixChars, PrefixLen)
	prefix := string(buf[prefixStart:])
	buf = append(buf, '_')
	buf = appendRandom(buf, base62, RandomLen)
	buf = append(buf, Checksum(string(buf))...)
	return Credential{Env: env, Prefix: prefix, Text: string(buf)}, nil
}

// appendRandom appends n characters drawn uniformly from alphabet, by
// rejection sampling so no character is more likely than another.
func appendRandom(buf []byte, alphabet string, n int) []byte {
	limit := byte(256 - 256%len(alphabet)) // largest multiple of len(alphabet) ≤ 256
	var b [64]byte
	for n > 0 {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		for _, c := range b {
			if n == 0 {
				break
			}
			if limit != 0 && c >= limit {
				continue
			}
			buf = append(buf, alphabet[int(c)%len(alphabet)])
			n--
		}
	}
	return buf
}

// Checksum is the CRC32 (IEEE) of body in base62, left-padded with '0' to
// six characters. body is the credential text before the checksum.
func Checksum(body string) string {
	d := checksum(body)
	return string(d[:])
}

// checksum is Checksum as an array, which Parse compares without a copy.
func checksum(body string) [ChecksumLen]byte {
	sum := crc32.ChecksumIEEE([]byte(body))
	var out [ChecksumLen]byte
	for i := ChecksumLen - 1; i >= 0; i-- {
		out[i] = base62[sum%62]
		sum /= 62
	}
	return out
}

// Parse checks the tag, env, prefix and secret alphabets and lengths, and the
// checksum. The result refers into text; the one allocation is the copy of
// the body that crc32 takes.
func Parse(text string) (Credential, error) {
	// agk_ + env(4) + _ + prefix + _ + secret
	if len(text) != maxTextBytes || text[:envStart] != Tag+"_" || text[envStart+4] != '_' {
		return Credential{}, ErrMalformed
	}
	env := domain.Env(text[envStart : envStart+4])
	if env != domain.EnvLive && env != domain.EnvTest {
		return Credential{}, ErrMalformed
	}
	prefixStart := envStart + 5
	prefix := text[prefixStart : prefixStart+PrefixLen]
	for i := 0; i < len(prefix); i++ {
		if c := prefix[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z') {
			return Credential{}, ErrMalformed
		}
	}
	if text[prefixStart+PrefixLen] != '_' {
		return Credential{}, ErrMalformed
	}
	secret := text[prefixStart+PrefixLen+1:]
	for i := 0; i < len(secret); i++ {
		if c := secret[i]; !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
			return Credential{}, ErrMalformed
		}
	}
	if sum := checksum(text[:len(text)-ChecksumLen]); string(sum[:]) != text[len(text)-ChecksumLen:] {
		return Credential{}, ErrMalformed
	}
	return Credential{Env: env, Prefix: prefix, Text: text}, nil
}

// Hash is what the store keeps: SHA-256 of the whole credential text.
func Hash(text string) [32]byte { return sha256.Sum256([]byte(text)) }

// Equal compares text against a stored hash in constant time.
func Equal(storedHash []byte, text string) bool {
	h := Hash(text)
	return len(storedHash) == len(h) && subtle.ConstantTimeCompare(storedHash, h[:]) == 1
}

// ParseBearer reads an Authorization header value: the scheme "Bearer"
// (any case), one or more spaces, then a token without spaces.
func ParseBearer(header string) (token string, ok bool) {
	const scheme = "bearer"
	if len(header) <= len(scheme) || header[len(scheme)] != ' ' || !strings.EqualFold(header[:len(scheme)], scheme) {
		return "", false
	}
	rest := strings.TrimLeft(header[len(scheme):], " ")
	if rest == "" {
		return "", false
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; c == ' ' || c == '\t' || c < 0x20 || c == 0x7f {
			return "", false
		}
	}
	return rest, true
}

// Redact returns a form of text, a credential, safe to log: tag, env and
// prefix in lower case, never any of the secret; "" when text does not
// look like a credential, in any case, as far as the "_" that ends its
// prefix (callers then show nothing of it: without that "_", what stands
// where a prefix would may be a secret's first characters, as in
// "agk_live_" followed by a secret alone).
func Redact(text string) string {
	const headLen = envStart + 5 + PrefixLen // tag_, env_, prefix
	if len(text) <= headLen || !strings.EqualFold(text[:envStart], Tag+"_") || text[envStart+4] != '_' || text[headLen] != '_' {
		return ""
	}
	head := strings.ToLower(text[:headLen])
	for i := envStart; i < len(head); i++ {
		if c := head[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '_' && i == envStart+4) {
			return ""
		}
	}
	return head + "_…"
}

// RedactText is text, a method, path, query or header value, as every log
// and every echo shows it: whatever starts like a credential ("agk_" in
// any case, anywhere, glued to other text or not) and runs on in letters,
// digits and "_" is its public prefix (Redact), or "agk_[redacted]" when it
// is not shaped as far as its prefix. "agk_" followed by nothing a
// credential is made of is text about the format, and stays. Text with a
// "%" is read as a reader decoding it would read it (redactEncoded).
func RedactText(text string) string {
	if strings.IndexByte(text, '%') >= 0 {
		return redactEncoded(text)
	}
	i := indexTag(text)
	if i < 0 {
		return text
	}
	var b strings.Builder
	for ; i >= 0; i = indexTag(text) {
		b.WriteString(text[:i])
		end := i + len(Tag) + 1
		for end < len(text) && isTokenChar(text[end]) {
			end++
		}
		switch r := Redact(text[i:end]); {
		case end == i+len(Tag)+1:
			b.WriteString(text[i:end])
		case r == "":
			b.WriteString(Tag + "_[redacted]")
		case end-i == len(r)-len("…"): // a public prefix alone, as Redact shows one
			b.WriteString(r[:end-i])
		default:
			b.WriteString(r)
		}
		text = text[end:]
	}
	b.WriteString(text)
	return b.String()
}

// indexTag is where "agk_", in any case, first appears in s, or -1.
func indexTag(s string) int {
	for i := 0; i+len(Tag) < len(s); i++ {
		if s[i+len(Tag)] == '_' && strings.EqualFold(s[i:i+len(Tag)], Tag) {
			return i
		}
	}
	return -1
}

func isTokenChar(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_'
}

// maxDecodings is how many times over redactEncoded reads a character
// percent-encoded ("%5F", "%255F", "%2535F", ...): more than any client
// encodes a path, and few enough that no text costs more than a bounded
// number of steps a byte.
const maxDecodings = 4

// redactEncoded is RedactText for text with a "%": a credential is found
// however its characters are written, each as itself or percent-encoded
// (either case of hex) up to maxDecodings times over, from every position
// a reader could start decoding at ("agk%5Flive%5F...", every byte %XX,
// the secret alone encoded, "%255F"). What is shown in its place is what
// RedactText shows for the decoded credential; the rest of text stays as
// it was, so nothing left decodes to a secret.
func redactEncoded(text string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(text); i++ {
		if c := text[i]; c != '%' && c != 'a' && c != 'A' {
			continue
		}
		tagEnd, ok := readTag(text, i)
		if !ok {
			continue
		}
		shown, end := readToken(text, tagEnd)
		if end == tagEnd { // "agk_" alone: text about the format
			continue
		}
		b.WriteString(text[last:i])
		b.WriteString(shown)
		last, i = end, end-1
	}
	if last == 0 {
		return text
	}
	b.WriteString(text[last:])
	return b.String()
}

// readTag reports whether text, read from i, starts with "agk_" in any
// case, and where that ends.
func readTag(text string, i int) (int, bool) {
	for k := 0; k <= len(Tag); k++ {
		if i >= len(text) {
			return 0, false
		}
		var c byte
		c, i = readChar(text, i, maxDecodings)
		if k == len(Tag) && c != '_' || k < len(Tag) && c|0x20 != Tag[k] {
			return 0, false
		}
	}
	return i, true
}

// readToken reads the letters, digits and "_" after a tag at i, and
// returns what RedactText shows for the tag and them, and where they end.
func readToken(text string, i int) (shown string, end int) {
	var tok [maxTextBytes + 1]byte
	n := copy(tok[:], Tag+"_")
	for i < len(text) {
		c, next := readChar(text, i, maxDecodings)
		if !isTokenChar(c) {
			break
		}
		if n < len(tok) {
			tok[n] = c
		}
		n, i = n+1, next
	}
	switch r := Redact(string(tok[:min(n, len(tok))])); {
	case r == "":
		return Tag + "_[redacted]", i
	case n == len(r)-len("…"): // a public prefix alone, as Redact shows one
		return r[:n], i
	default:
		return r, i
	}
}

// readChar is the character of text at i as a reader decoding %XX up to
// depth times over sees it, and the index after it. i < len(text).
func readChar(text string, i, depth int) (byte, int) {
	if text[i] == '%' && depth > 0 {
		if c, next, ok := readEscape(text, i+1, depth); ok {
			return c, next
		}
	}
	return text[i], i + 1
}

// readEscape reads the two hex digits of an escape whose "%" ends at i,
// each itself possibly encoded; a "%" they decode to starts an escape
// one decoding further.
func readEscape(text string, i, depth int) (byte, int, bool) {
	if i >= len(text) {
		return 0, 0, false
	}
	h1, j := readChar(text, i, depth-1)
	if !isHex(h1) || j >= len(text) {
		return 0, 0, false
	}
	h2, k := readChar(text, j, depth-1)
	if !isHex(h2) {
		return 0, 0, false
	}
	c := unhex(h1)<<4 | unhex(h2)
	if c == '%' && depth > 1 {
		if d, next, ok := readEscape(text, k, depth-1); ok {
			return d, next, true
		}
	}
	return c, k, true
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
