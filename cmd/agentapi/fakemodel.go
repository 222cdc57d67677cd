package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/agentapi/agentapi/internal/llm/llmtest"
)

// fakeModel serves a stand-in for an OpenAI-compatible Chat Completions
// API, so that a newcomer sees a streamed answer without a model account:
// every question gets a canned answer that quotes it, streamed a word at a
// time when asked to stream. It runs until interrupted.
func fakeModel(ctx context.Context, e env, args []string) error {
	fs := e.newFlagSet("agentapi fake-model")
	addr := fs.String("addr", "127.0.0.1:8081", "listen address; serve takes --llm-url http://ADDR/v1")
	delay := fs.Duration("delay", 80*time.Millisecond, "pause between streamed words")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	answer := func(req llmtest.Request) (int, string) {
		return http.StatusOK, llmtest.Answer(fmt.Sprintf("This is agentapi's fake model. You asked: %q. A real model, set with serve --llm-url, answers here.", req.Question()))
	}
	srv := &http.Server{Handler: llmtest.Handler(answer, *delay), ReadHeaderTimeout: readHeaderTimeout}
	fmt.Fprintf(e.stderr, "agentapi: fake model at http://%s/v1 (serve --llm-url http://%s/v1 --llm-model fake); Ctrl-C stops it\n", ln.Addr(), ln.Addr())
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
