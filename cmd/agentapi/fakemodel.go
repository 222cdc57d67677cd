package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
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
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { fakeCompletion(w, r, *delay) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout}
	fmt.Fprintf(e.stderr, "agentapi: fake model at http://%s/v1 (serve --llm-url http://%s/v1 --llm-model fake); Ctrl-C stops it\n", ln.Addr(), ln.Addr())
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// fakeCompletion answers one Chat Completions request.
func fakeCompletion(w http.ResponseWriter, r *http.Request, delay time.Duration) {
	var req struct {
		Messages []struct{ Role, Content string } `json:"messages"`
		Stream   bool                             `json:"stream"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"the body is not a chat completions request"}}`, http.StatusBadRequest)
		return
	}
	question := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			question = m.Content
		}
	}
	answer := fmt.Sprintf("This is agentapi's fake model. You asked: %q. A real model, set with serve --llm-url, answers here.", question)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "chat.completion",
			"choices": []any{map[string]any{"index": 0, "message": map[string]string{"role": "assistant", "content": answer}, "finish_reason": "stop"}}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	for i, word := range strings.SplitAfter(answer, " ") {
		if i > 0 {
			time.Sleep(delay)
		}
		chunk, _ := json.Marshal(map[string]any{"object": "chat.completion.chunk",
			"choices": []any{map[string]any{"index": 0, "delta": map[string]string{"content": word}}}})
		if _, err := fmt.Fprintf(w, "data: %s\n\n", chunk); err != nil || rc.Flush() != nil {
			return
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}
