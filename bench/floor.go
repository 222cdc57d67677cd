package main

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// serveFloor answers every request with a fixed JSON body: what net/http
// alone costs, the floor agentapi is compared with.
func serveFloor(ctx context.Context, addr string, size int) error {
	body := []byte(`{"data":{"pad":"` + strings.Repeat("x", max(size-len(`{"data":{"pad":""}}`)-1, 0)) + `"}}` + "\n")
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		return err
	}
	return nil
}
