package api

import (
	"strings"
	"testing"
)

// A body nested deeper than encoding/json accepts is refused with a message
// that says so; brackets inside strings do not count, and a body just
// within the bound is read.
func TestDecodeObjectDepth(t *testing.T) {
	nested := func(n int) string { return `{"a":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}` }
	for _, c := range []struct {
		name, body, msg string
	}{
		{"too deep", nested(maxJSONDepth + 1), "The request body nests arrays or objects more than 10000 levels deep."},
		{"too deep and broken", nested(maxJSONDepth+1) + "x", "The request body nests arrays or objects more than 10000 levels deep."},
		{"brackets in a string", `{"a":"` + strings.Repeat("[", 20000) + `"`, "The request body is not valid JSON."},
		{"escaped quote in a string", `{"a":"\"` + strings.Repeat("{", 20000) + `"`, "The request body is not valid JSON."},
		{"at the bound", nested(maxJSONDepth), ""},
	} {
		_, _, err := decodeObject([]byte(c.body))
		got := ""
		if err != nil {
			got = err.Message
		}
		if got != c.msg {
			t.Errorf("%s: %q, want %q", c.name, got, c.msg)
		}
	}
}
