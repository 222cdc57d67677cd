package domain_test

import (
	"strings"
	"testing"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/agentapi/agentapi/internal/domain"
)

func TestCheckName(t *testing.T) {
	tests := []struct {
		name, in, want string
		problem        domain.NameProblem
	}{
		{"plain", "Support bot", "Support bot", domain.NameOK},
		{"trimmed first", " \t Support\u3000\n", "Support", domain.NameOK},
		{"greek", "ΟΔΟΣ", "ΟΔΟΣ", domain.NameOK},
		{"long s", "ſupport", "ſupport", domain.NameOK},
		{"one digit", "7", "7", domain.NameOK},
		{"one symbol", "→", "→", domain.NameOK},
		{"emoji with joiner", "👩\u200d💻", "👩\u200d💻", domain.NameOK},
		{"mark on a base", "e\u0301", "e\u0301", domain.NameOK},
		{"bidi beside text", "\u202eabc\u202c", "\u202eabc\u202c", domain.NameOK},
		{"zero width beside text", "\u200ba\u200b", "\u200ba\u200b", domain.NameOK},
		{"at the limit", strings.Repeat("é", 200), strings.Repeat("é", 200), domain.NameOK},
		{"limit counts after trimming", " " + strings.Repeat("a", 200) + " ", strings.Repeat("a", 200), domain.NameOK},

		{"not utf-8", "a\xffb", "a\xffb", domain.NameNotUTF8},
		{"empty", "", "", domain.NameBlank},
		{"spaces only", " \u00a0\u2003\u3000 ", "", domain.NameBlank},
		{"too long", strings.Repeat("a", 201), strings.Repeat("a", 201), domain.NameTooLong},
		{"control", "a\x00b", "a\x00b", domain.NameControl},
		{"inner line break", "a\nb", "a\nb", domain.NameControl},
		{"del", "a\x7f", "a\x7f", domain.NameControl},
		{"c1 control", "a\u0085b", "a\u0085b", domain.NameControl},
		{"line separator", "line\u2028sep", "line\u2028sep", domain.NameControl},
		{"paragraph separator", "para\u2029sep", "para\u2029sep", domain.NameControl},

		{"bidi override only", "\u202e", "\u202e", domain.NameInvisible},
		{"every bidi control", "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069", "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069", domain.NameInvisible},
		{"bidi marks", "\u200e\u200f\u061c", "\u200e\u200f\u061c", domain.NameInvisible},
		{"zero-width space", "\u200b", "\u200b", domain.NameInvisible},
		{"zero-width characters", "\u200b\u200c\u200d\u2060\ufeff", "\u200b\u200c\u200d\u2060\ufeff", domain.NameInvisible},
		{"zero width between spaces", " \u200b ", "\u200b", domain.NameInvisible},
		{"soft hyphen", "\u00ad", "\u00ad", domain.NameInvisible},
		{"combining marks alone", "\u0301\u0308", "\u0301\u0308", domain.NameInvisible},
		{"variation selector", "\ufe0f", "\ufe0f", domain.NameInvisible},
		{"hangul fillers", "\u3164\u115f\u1160\uffa0", "\u3164\u115f\u1160\uffa0", domain.NameInvisible},
		{"braille blank", "\u2800", "\u2800", domain.NameInvisible},
		{"tag characters", "\U000e0041\U000e0042", "\U000e0041\U000e0042", domain.NameInvisible},
		{"private use", "\ue000", "\ue000", domain.NameInvisible},
		{"mixed invisibles", "\u202e\u200b\u0301\u2066\ufeff\u3164", "\u202e\u200b\u0301\u2066\ufeff\u3164", domain.NameInvisible},
		// A control character is the first problem, wherever it is.
		{"control among invisibles", "\u200b\x01", "\u200b\x01", domain.NameControl},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problem := domain.CheckName(tt.in)
			if got != tt.want || problem != tt.problem {
				t.Fatalf("CheckName(%+q) = %+q, %d; want %+q, %d", tt.in, got, problem, tt.want, tt.problem)
			}
		})
	}
}

func TestNameKey(t *testing.T) {
	collide := [][2]string{
		{"ΟΔΟΣ", "οδος"},       // final sigma folds to σ
		{"ſupport", "SUPPORT"}, // long s folds to s
		{"Straße", "STRASSE"},  // full folding: ß → ss
		{"STRAẞE", "strasse"},  // capital sharp s
		{"  Support Bot ", "support bot"},
		{"Ǆemal", "ǆemal"}, // a title-case digraph
		{"Å", "å"},         // precomposed and decomposed
		{"Å", "å"},         // the angstrom sign is A with a ring
		{"ᾳ", "ΑΙ"},        // U+0345 folds apart from its base
		{"ᾼ", "α\u0345"},
		{"Ꭰ", "ꭰ"}, // Cherokee folds to the capital
		{"Ᏸ", "ᏸ"},
		{"ﬀ", "FF"}, // a ligature folds to its letters
		{"ŉ", "ʼN"},
	}
	for _, c := range collide {
		if a, b := domain.NameKey(c[0]), domain.NameKey(c[1]); a != b {
			t.Errorf("NameKey(%+q) = %+q, NameKey(%+q) = %+q: want equal", c[0], a, c[1], b)
		}
	}
	differ := [][2]string{
		{"support", "support2"},
		{"e\u0301", "e"}, // an accent is part of the name
		{"Ⅰ", "I"},       // compatibility forms stay apart: NFC, not NFKC
		{"①", "1"},
		{"a\u200bb", "ab"}, // invisible characters beside text are kept
		{"İ", "i"},         // dotted capital I folds to i with a dot above
	}
	for _, d := range differ {
		if a, b := domain.NameKey(d[0]), domain.NameKey(d[1]); a == b {
			t.Errorf("NameKey(%+q) = NameKey(%+q) = %+q: want different", d[0], d[1], a)
		}
	}
}

// TestNameKeyEveryCodePoint checks the key on every cased code point: it is
// stable (a key is its own key, so a stored key never needs recomputing
// from itself), it is in NFC, and every character has the key of all those
// Go's simple case folding (unicode.SimpleFold) ties it to. Before the
// Cherokee correction, U+13A0 and U+AB70 failed all three. Every cased
// character is in the first two planes, which is where the loop stops.
func TestNameKeyEveryCodePoint(t *testing.T) {
	bad := 0
	for r := rune(0); r <= 0x1FFFF && bad < 10; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		k := domain.NameKey(string(r))
		if !norm.NFC.IsNormalString(k) {
			t.Errorf("%U: key %+q is not NFC", r, k)
			bad++
		}
		if kk := domain.NameKey(k); kk != k {
			t.Errorf("%U: key %+q has key %+q", r, k, kk)
			bad++
		}
		for o := unicode.SimpleFold(r); o != r; o = unicode.SimpleFold(o) {
			if ko := domain.NameKey(string(o)); ko != k {
				t.Errorf("%U and %U fold together, keys %+q and %+q", r, o, k, ko)
				bad++
			}
		}
	}
}

// TestNameProblemMessage: the one wording of each name problem.
func TestNameProblemMessage(t *testing.T) {
	for p, want := range map[domain.NameProblem]string{
		domain.NameOK: "", domain.NameBlank: "name must not be blank.", domain.NameTooLong: "name must be at most 200 characters.",
		domain.NameControl: "name must not contain control characters.", domain.NameNotUTF8: "name must be UTF-8 text.",
	} {
		if got := p.Message("name"); got != want {
			t.Errorf("%d: %q, want %q", p, got, want)
		}
	}
}
