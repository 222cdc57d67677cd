package llm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzParseResponse checks the parser that faces the provider: it either
// returns the first choice's text, trimmed and non-empty, or an error whose
// text is one of a fixed few, so nothing from the body can reach a log.
func FuzzParseResponse(f *testing.F) {
	for _, seed := range []string{
		`{"choices":[{"message":{"role":"assistant","content":"4"}}]}`,
		`{"choices":[{"message":{"content":"  padded\n"}},{"message":{"content":"second"}}]}`,
		`{"choices":[]}`,
		`{"choices":[{"message":{"content":null}}]}`,
		`{"choices":[{"message":{"content":[{"type":"text","text":"x"}]}}]}`,
		`{"error":{"message":"sk-secret"}}`,
		`{"choices":[{"message":{"content":"a"}}]}garbage`,
		`[`, ``, `null`,
	} {
		f.Add([]byte(seed))
	}
	allowed := map[string]bool{
		"llm: malformed response":                   true,
		"llm: no answer in response: no choices":    true,
		"llm: no answer in response: empty content": true,
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseResponse(data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || (e.Kind != KindMalformed && e.Kind != KindEmpty) {
				t.Fatalf("error %v (%T)", err, err)
			}
			if !allowed[err.Error()] {
				t.Fatalf("error text %q is not one of the fixed messages", err)
			}
			return
		}
		// A plain decoder must agree on the text.
		var ref struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(data, &ref); err != nil || len(ref.Choices) == 0 {
			t.Fatalf("parsed %q from a body a plain decoder rejects: %v", got, err)
		}
		if want := strings.TrimSpace(ref.Choices[0].Message.Content); got != want || got == "" {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
}
