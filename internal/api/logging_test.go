package api

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzRequestLine holds JSONLog's request line (appendRequestLine) to the
// line slog's own JSON handler writes for the same request, byte for byte
// but for the time, which each takes when it writes.
func FuzzRequestLine(f *testing.F) {
	for i, s := range trickyStrings {
		f.Add("GET", "/v1/ai-agents/"+s, s, "route "+s, s, 200+i, int64(i)*1000, int64(i)*1234567)
	}
	f.Add("BREW\x00", "/", "", "", "", 0, int64(-1), int64(-5))
	f.Fuzz(func(t *testing.T, method, path, id, route, client string, status int, written, us int64) {
		r := httptest.NewRequest("GET", "http://api.test/", nil)
		r.Method, r.URL.Path = method, path
		rec := &recorder{id: id, route: route, client: client, status: status, written: written, keyPfx: client + "pfx"}
		var fast, std bytes.Buffer
		(&Server{log: slog.New(JSONLog(&fast))}).logRequest(r, rec, time.Duration(us)*time.Microsecond)
		(&Server{log: slog.New(slog.NewJSONHandler(&std, nil))}).logRequest(r, rec, time.Duration(us)*time.Microsecond)
		got, want := untimed(t, fast.String()), untimed(t, std.String())
		if got != want {
			t.Fatalf("JSONLog wrote\n%s\nslog's JSON handler\n%s", got, want)
		}
	})
}

// untimed is a log line without its time field, which must be RFC 3339.
func untimed(t *testing.T, line string) string {
	t.Helper()
	ts, rest, ok := strings.Cut(strings.TrimPrefix(line, `{"time":"`), `"`)
	if _, err := time.Parse(time.RFC3339Nano, ts); !ok || err != nil {
		t.Fatalf("no time first in %q", line)
	}
	return rest
}
