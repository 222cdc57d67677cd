package domain

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// The name rule (docs/api.md, Names), for every name a
// person gives something: AI agents, API keys, accounts. The rule and its
// wording (NameProblem.Message) live only here.

// MaxNameLength bounds a name, in Unicode code points after trimming.
const MaxNameLength = 200

// NameProblem is what makes a name unacceptable.
type NameProblem int

const (
	NameOK        NameProblem = iota
	NameNotUTF8               // bytes that are not UTF-8 text
	NameBlank                 // nothing left after trimming
	NameTooLong               // more than MaxNameLength code points
	NameControl               // a control character (Unicode Cc) or line break: tabs, \n, \r, U+2028, U+2029
	NameInvisible             // no visible character at all (see IsVisible)
)

// CheckName trims s (Unicode white space at both ends) and applies the
// name rule to what is left; it returns the trimmed name, which is the one
// to store. The first problem in the order of the constants is reported.
func CheckName(s string) (string, NameProblem) {
	s = strings.TrimSpace(s)
	switch {
	case !utf8.ValidString(s):
		return s, NameNotUTF8
	case s == "":
		return s, NameBlank
	case utf8.RuneCountInString(s) > MaxNameLength:
		return s, NameTooLong
	case strings.IndexFunc(s, isNameControl) >= 0:
		return s, NameControl
	case strings.IndexFunc(s, IsVisible) < 0:
		return s, NameInvisible
	}
	return s, NameOK
}

// isNameControl reports whether r may not be in a name: a control
// character (Cc, which holds tabs, \n and \r) or one of Unicode's own line
// and paragraph separators (U+2028, U+2029), line breaks all the same.
func isNameControl(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029'
}

// IsVisible reports whether r, on its own, puts something on the screen: a
// letter, number, punctuation mark or symbol (general categories L, N, P,
// S). Not visible, so that a name made only of them is refused:
//   - format characters (Cf): the bidirectional controls U+202A–U+202E and
//     U+2066–U+2069, the zero-width space, joiners and word joiner U+200B–U+200D
//     and U+2060, the byte order mark U+FEFF, soft hyphen, tag characters;
//   - combining marks (M): they only decorate a base character, so one
//     counts only through that base;
//   - spaces (Z), controls (Cc), private use and unassigned code points;
//   - letters that are default-ignorable and render as nothing (the Hangul
//     fillers U+115F, U+1160, U+3164, U+FFA0), and U+2800 BRAILLE PATTERN
//     BLANK, a symbol that is drawn as an empty cell.
//
// Invisible characters are allowed beside visible ones (a zero-width joiner
// inside an emoji sequence, a right-to-left mark in mixed-script text).
func IsVisible(r rune) bool {
	return unicode.In(r, unicode.L, unicode.N, unicode.P, unicode.S) &&
		!unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) &&
		r != '\u2800'
}

// NameKey is the form under which names are compared for uniqueness (agent
// names, per account): the trimmed name, canonically decomposed (NFD), fully
// case-folded (ß→ss, ſ→s, final ς→σ), and recomposed (NFC). Two names
// collide exactly when their keys are equal; this is Unicode's canonical
// caseless match (The Unicode Standard, D145), which decomposes before
// folding so that a combining mark folded apart from its base (U+0345)
// compares equal however the name was composed.
//
// Stored keys are computed by this function: changing it changes which
// names collide, and needs a migration that recomputes them
// (store/migrate.go, refoldAgentNames).
func NameKey(name string) string {
	k := cases.Fold().String(norm.NFD.String(strings.TrimSpace(name)))
	// golang.org/x/text folds Cherokee capitals to the small letters
	// (go.dev/issue/46101); Unicode folds every Cherokee letter to its
	// capital, the script's older form.
	k = strings.Map(func(r rune) rune {
		if isCherokeeSmall(r) {
			return unicode.ToUpper(r)
		}
		return r
	}, k)
	return norm.NFC.String(k)
}

// isCherokeeSmall reports whether r is a Cherokee small letter
// (U+13F8–U+13FD, U+AB70–U+ABBF).
func isCherokeeSmall(r rune) bool {
	return (r >= 0x13F8 && r <= 0x13FD) || (r >= 0xAB70 && r <= 0xABBF)
}

// Message is what is wrong with a name given as field, in the words every
// surface uses ("name must not be blank."); "" for NameOK.
func (p NameProblem) Message(field string) string {
	switch p {
	case NameOK:
		return ""
	case NameBlank:
		return field + " must not be blank."
	case NameTooLong:
		return fmt.Sprintf("%s must be at most %d characters.", field, MaxNameLength)
	case NameControl:
		return field + " must not contain control characters."
	case NameInvisible:
		return field + " must contain a visible character: bidirectional controls, zero-width characters and combining marks alone are not a name."
	}
	return field + " must be UTF-8 text."
}
