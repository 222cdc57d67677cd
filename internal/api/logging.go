package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

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

// knownMethods are HTTP's registered methods: a response never repeats a
// method it does not know, which may be a credential sent in its place.
var knownMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace}

// logRequest writes the request's log line. The attributes are typed (no
// reflection, no fmt), and the record goes straight to the handler: through
// Logger.LogAttrs, slog would walk the stack for a source position that the
// handler never prints. The line is the one slog's Info with these
// key-value pairs wrote; BenchmarkRequestLogLine in keycache_test.go
// compares the two.
func (s *Server) logRequest(r *http.Request, rec *recorder, d time.Duration) {
	ctx := context.Background()
	h := s.log.Handler()
	if !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	lr := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	lr.AddAttrs(
		slog.String("request_id", rec.id),
		slog.String("method", credential.RedactText(r.Method)),
		slog.String("path", credential.RedactText(r.URL.Path)),
		slog.String("route", rec.route),
		slog.Int("status", rec.status),
		slog.Int64("bytes", rec.written),
		// A float, as before, for the readers of the logs; slog formats it
		// through encoding/json, the one costly attribute left.
		slog.Float64("duration_ms", float64(d.Microseconds())/1000),
		slog.String("key_prefix", rec.keyPfx),
		slog.String("remote", rec.client),
	)
	_ = h.Handle(ctx, lr)
}
