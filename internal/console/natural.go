package console

import (
	"cmp"
	"strings"
	"unicode"
)

// naturalCompare orders names as people read them: runs of digits by
// their number ("Agent 2" before "Agent 10"), other text case-insensitively.
func naturalCompare(a, b string) int {
	a, b = strings.ToLower(a), strings.ToLower(b)
	for a != "" && b != "" {
		ra, rb := leadingRun(a), leadingRun(b)
		if c := compareRuns(ra, rb); c != 0 {
			return c
		}
		a, b = a[len(ra):], b[len(rb):]
	}
	return cmp.Compare(len(a), len(b))
}

// leadingRun is s's first run of digits, or of anything else.
func leadingRun(s string) string {
	digit := isDigit(rune(s[0]))
	end := strings.IndexFunc(s, func(r rune) bool { return isDigit(r) != digit })
	if end < 0 {
		return s
	}
	return s[:end]
}

// compareRuns compares two numbers by value (without leading zeros, the
// longer is larger), anything else as text.
func compareRuns(a, b string) int {
	if !isDigit(rune(a[0])) || !isDigit(rune(b[0])) {
		return strings.Compare(a, b)
	}
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b))
}

func isDigit(r rune) bool { return r < unicode.MaxASCII && '0' <= r && r <= '9' }
