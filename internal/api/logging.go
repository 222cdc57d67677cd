package api

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/agentapi/agentapi/internal/credential"
)

// LogHandler wraps h so that every record logged with a request's context
// carries that request's id, wherever in the code it is logged from.
func LogHandler(h slog.Handler) slog.Handler { return requestIDHandler{h} }

type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := requestID(ctx); id != "" {
		has := false
		r.Attrs(func(a slog.Attr) bool {
			has = a.Key == "request_id"
			return !has
		})
		if !has {
			r.AddAttrs(slog.String("request_id", id))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(as)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}

// logMethod is a request's method as the log shows it. A client that sends
// its credential as the method (the request line "agk_live_… /v1/me
// HTTP/1.1") gets only the credential's public prefix logged
// (docs/observability.md, Logs), as logPath does for one pasted into the path.
func logMethod(m string) string {
	i := strings.Index(m, credential.Tag+"_")
	if i < 0 {
		return m
	}
	if r := credential.Redact(m[i:]); r != "" {
		return m[:i] + r
	}
	return m[:i] + "[redacted]"
}

// knownMethod is m when it is one of HTTP's registered methods, else "":
// a response never repeats a method it does not know, which may be a
// credential sent in its place.
func knownMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return ""
}
