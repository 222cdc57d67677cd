package api

import (
	"github.com/agentapi/agentapi/internal/credential"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/requestlog"
)

// UsageRecorder receives every /v1 request that identified a key, once
// answered (internal/usage.Recorder). Record must not block on the store.
type UsageRecorder interface {
	Record(requestlog.Log)
}

// Bounds of what a request log keeps of the request line.
const (
	maxLogMethod = 16
	maxLogPath   = 512
)

// recordUsage hands the request to the usage recorder: its line and
// outcome, never a body, query string or header. The path is the escaped
// one (so it is plain ASCII, whatever the client sent), with any credential
// pasted into it redacted, as in the log line.
func (s *Server) recordUsage(r *http.Request, rec *recorder, start time.Time, d time.Duration) {
	s.usage.Record(requestlog.Log{
		ID: rec.id, AccountID: rec.acctID, KeyID: rec.keyID, At: start.UTC(),
		Method: cut(credential.RedactText(r.Method), maxLogMethod), Route: rec.route,
		Path: cut(credential.RedactText(r.URL.EscapedPath()), maxLogPath), Status: rec.status,
		ErrorCode: rec.code, Duration: d, Client: rec.client,
	})
}

// cut keeps at most n bytes of s, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
