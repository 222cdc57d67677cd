package domain

import (
	"strings"
	"testing"
)

func TestCheckText(t *testing.T) {
	for _, c := range []struct {
		name, s string
		max     int
		want    TextProblem
	}{
		{"empty", "", 10, TextOK},
		{"lines and tabs", "a\nb\r\n\tc", 10, TextOK},
		{"exactly max code points", strings.Repeat("é", 10), 10, TextOK},
		{"one code point over", strings.Repeat("é", 11), 10, TextTooLong},
		{"NUL", "a\x00b", 10, TextControl},
		{"escape", "a\x1bb", 10, TextControl},
		{"DEL", "a\x7fb", 10, TextControl},
		{"C1 control", "a\u0085b", 10, TextControl},
		{"too long wins over control", strings.Repeat("\x00", 11), 10, TextTooLong},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := CheckText(c.s, c.max); got != c.want {
				t.Fatalf("CheckText(%q, %d) = %d, want %d", c.s, c.max, got, c.want)
			}
		})
	}
}
