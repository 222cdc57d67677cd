package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentapi/agentapi/internal/llm"
	"github.com/agentapi/agentapi/internal/llm/llmtest"
)

// collect streams from c and returns the deltas seen and the answer.
func collect(c *llm.Client, ctx context.Context) ([]string, string, error) {
	var deltas []string
	answer, err := c.Stream(ctx, []llm.Message{{Role: "user", Content: "q"}}, func(d string) error {
		deltas = append(deltas, d)
		return nil
	})
	return deltas, answer, err
}

// events plays a raw event stream body.
func events(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}
}

func data(tok string) string { return "data: " + llmtest.Chunk(tok) + "\n\n" }

func TestStreamParsesEvents(t *testing.T) {
	var got map[string]any
	srv := peer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &got)
		if r.Header.Get("Accept") == "" {
			t.Error("no Accept")
		}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		// A role chunk without content, a comment, another field, CRLF
		// line ends, a usage chunk with no choices: all ignored.
		_, _ = io.WriteString(w, `data: {"choices":[{"delta":{"role":"assistant"}}]}`+"\n\n"+
			": ping\n\nid: 1\r\n"+data("\n  ")+data("The ")+"data:"+llmtest.Chunk("answer")+"\r\n\r\n"+
			data(" is 4. ")+`data: {"choices":[],"usage":{"total_tokens":3}}`+"\n\ndata: [DONE]\n\n")
	})
	deltas, answer, err := collect(newClient(t, srv.URL, testKey, patient), context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"The ", "answer", " is 4. "}; !reflect.DeepEqual(deltas, want) {
		t.Fatalf("deltas %q, want %q", deltas, want)
	}
	if answer != "The answer is 4." {
		t.Fatalf("answer %q", answer)
	}
	if got["stream"] != true || got["model"] != "test-model" {
		t.Fatalf("request %v", got)
	}
}

func TestStreamFailures(t *testing.T) {
	long := "data: " + strings.Repeat("x", 300<<10) + "\n\n"
	tests := []struct {
		name string
		h    http.HandlerFunc
		kind llm.Kind
	}{
		{"status", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":{"message":"`+secret+`"}}`, http.StatusTooManyRequests)
		}, llm.KindStatus},
		{"not an event stream", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, secret)
		}, llm.KindMalformed},
		{"bad chunk", events(data("a") + "data: {" + secret + "\n\n"), llm.KindMalformed},
		{"error in stream", events(data("a") + `data: {"error":{"message":"` + secret + `"}}` + "\n\n"), llm.KindStatus},
		{"no [DONE]", events(data("a")), llm.KindTransport},
		{"empty", events(data("  ") + "data: [DONE]\n\n"), llm.KindEmpty},
		{"line too long", events(long), llm.KindTooLarge},
		{"answer too large", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			piece := data(strings.Repeat("y", 100<<10))
			for range 50 {
				if _, err := io.WriteString(w, piece); err != nil {
					return
				}
			}
		}, llm.KindTooLarge},
		{"json fallback broken", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, "{"+secret)
		}, llm.KindMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := peer(t, tt.h)
			// A generous bound: this is no test of time, and the race
			// detector makes megabytes of chunks slow to parse.
			_, _, err := collect(newClient(t, srv.URL, "", time.Minute), context.Background())
			wantKind(t, err, tt.kind)
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error quotes the peer: %q", err)
			}
		})
	}
}

func TestStreamAcceptsAPlainAnswer(t *testing.T) {
	srv := peer(t, func(w http.ResponseWriter, r *http.Request) { answer(w, " all at once ") })
	deltas, got, err := collect(newClient(t, srv.URL, "", patient), context.Background())
	if err != nil || got != "all at once" || !reflect.DeepEqual(deltas, []string{"all at once"}) {
		t.Fatalf("%q %q %v", deltas, got, err)
	}
}

func TestStreamStopsWhenTheCallerStops(t *testing.T) {
	fake := llmtest.NewServer(t, nil)
	aborted := make(chan struct{})
	fake.StreamWith(func(r llmtest.Request, send func(string) bool) {
		send("one ")
		<-r.Context.Done() // the model waits; the client must hang up
		close(aborted)
	})
	stop := errors.New("reader gone")
	_, err := newClient(t, fake.URL, "", patient).Stream(context.Background(),
		[]llm.Message{{Role: "user", Content: "q"}}, func(string) error { return stop })
	if e := wantKind(t, err, llm.KindCanceled); !errors.Is(e, stop) {
		t.Fatalf("cause lost: %v", err)
	}
	<-aborted
}

func TestStreamCanceledByCaller(t *testing.T) {
	fake := llmtest.NewServer(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	fake.StreamWith(func(r llmtest.Request, send func(string) bool) {
		send("one ")
		cancel()
		<-r.Context.Done()
	})
	_, _, err := collect(newClient(t, fake.URL, "", patient), ctx)
	if e := wantKind(t, err, llm.KindCanceled); !errors.Is(e, context.Canceled) {
		t.Fatalf("cause: %v", err)
	}
}

func TestStreamTimeout(t *testing.T) {
	fake := llmtest.NewServer(t, nil)
	fake.StreamWith(func(r llmtest.Request, send func(string) bool) {
		send("one ")
		<-r.Context.Done()
	})
	_, _, err := collect(newClient(t, fake.URL, "", 100*time.Millisecond), context.Background())
	wantKind(t, err, llm.KindTimeout)
}

func TestFakePeerStreams(t *testing.T) {
	fake := llmtest.NewServer(t, llmtest.Echo)
	deltas, got, err := collect(newClient(t, fake.URL, "", patient), context.Background())
	if err != nil || got != "echo: q" || !reflect.DeepEqual(deltas, []string{"echo: ", "q"}) {
		t.Fatalf("%q %q %v", deltas, got, err)
	}
	if reqs := fake.Requests(); len(reqs) != 1 || !reqs[0].Stream {
		t.Fatalf("recorded %+v", reqs)
	}
	failing := llmtest.NewServer(t, func(llmtest.Request) (int, string) { return 502, `{}` })
	_, _, err = collect(newClient(t, failing.URL, "", patient), context.Background())
	if e := wantKind(t, err, llm.KindStatus); e.Status != 502 {
		t.Fatalf("status %d", e.Status)
	}
}

func TestConversationIsBounded(t *testing.T) {
	// 100 turns of 500 characters (250 + 250, multi-byte: characters, not
	// bytes, count): 48 fit in 24,000.
	var turns []llm.Turn
	for i := range 100 {
		q := strings.Repeat("é", 249) + string(rune('0'+i%10))
		turns = append(turns, llm.Turn{Question: q, Answer: strings.Repeat("a", 250)})
	}
	msgs := llm.Conversation("sys", turns, "now?")
	if len(msgs) != 1+2*48+1 || msgs[0].Role != "system" || msgs[len(msgs)-1].Content != "now?" {
		t.Fatalf("%d messages", len(msgs))
	}
	if msgs[1].Content != turns[52].Question || msgs[len(msgs)-3].Content != turns[99].Question {
		t.Fatal("not the most recent turns, in order")
	}
	chars := 0
	for _, m := range msgs[1 : len(msgs)-1] {
		chars += utf8.RuneCountInString(m.Content)
	}
	if chars > llm.MaxContextChars {
		t.Fatalf("%d characters of context", chars)
	}
	// A single turn too long leaves no earlier turns, never part of one.
	huge := []llm.Turn{{Question: "old", Answer: "x"}, {Question: strings.Repeat("q", 24001), Answer: "a"}}
	if msgs := llm.Conversation("", huge, "q"); len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	// Exactly the budget fits.
	exact := []llm.Turn{{Question: strings.Repeat("q", 23999), Answer: "a"}}
	if msgs := llm.Conversation("", exact, "q"); len(msgs) != 3 {
		t.Fatalf("%d messages", len(msgs))
	}
}
