package client

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
)

// maxEventLine bounds one line of a streamed answer: an event carries at
// most the whole answer, which maxBody already bounds.
const maxEventLine = maxBody

// StreamEvent is one step of a streamed answer: a piece of its text
// (Delta), or, last, the recorded answer (Answer set, Delta empty).
type StreamEvent struct {
	Delta  string
	Answer *Answer
}

// AskStream asks like Ask with "stream": true and yields the answer's text
// as the model produces it, then the recorded answer. A refusal (any
// non-2xx) or a failure after the stream began (the server's error event)
// is yielded as an *Error; a broken stream as another error. Stopping the
// loop early closes the connection, which cancels the model call; the
// question is then recorded as failed. Streams are not retried.
func (c *Client) AskStream(ctx context.Context, agentID string, q Question) iter.Seq2[StreamEvent, error] {
	return func(yield func(StreamEvent, error) bool) {
		resp, err := c.openStream(ctx, agentID, q)
		if err != nil {
			yield(StreamEvent{}, err)
			return
		}
		defer resp.Body.Close()
		readEvents(resp, yield)
	}
}

func (c *Client) openStream(ctx context.Context, agentID string, q Question) (*http.Response, error) {
	p, err := agentPath(agentID, "/questions")
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(struct {
		Question
		Stream bool `json:"stream"`
	}{q, true})
	if err != nil {
		return nil, fmt.Errorf("client: encode request: %w", err)
	}
	resp, err := c.send(ctx, call{method: http.MethodPost, path: p}, body, "text/event-stream, application/json", "")
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return nil, fmt.Errorf("client: response %d is not an event stream", resp.StatusCode)
		}
		return nil, parseError(resp.StatusCode, resp.Header, data)
	}
	return resp, nil
}

// readEvents parses the server-sent events of a streamed answer.
func readEvents(resp *http.Response, yield func(StreamEvent, error) bool) {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), maxEventLine)
	var name, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:"):
			data = strings.TrimPrefix(line[len("data:"):], " ")
		case line == "" && name != "":
			ev, err, last := decodeEvent(resp, name, data)
			if (ev != StreamEvent{} || err != nil) && !yield(ev, err) || last {
				return
			}
			name, data = "", ""
		}
	}
	err := cmp.Or(sc.Err(), io.ErrUnexpectedEOF)
	yield(StreamEvent{}, fmt.Errorf("client: answer stream ended early: %w", err))
}

// decodeEvent turns one event into what AskStream yields; last reports the
// end of the stream.
func decodeEvent(resp *http.Response, name, data string) (StreamEvent, error, bool) {
	switch name {
	case "answer.delta":
		var d struct {
			Delta string `json:"delta"`
		}
		if err := json.Unmarshal([]byte(data), &d); err != nil {
			return StreamEvent{}, errors.New("client: malformed answer.delta event"), true
		}
		return StreamEvent{Delta: d.Delta}, nil, false
	case "answer.completed":
		var a Answer
		if err := decodeData(&response{status: resp.StatusCode, body: []byte(data)}, &a); err != nil {
			return StreamEvent{}, err, true
		}
		return StreamEvent{Answer: &a}, nil, true
	case "error":
		return StreamEvent{}, parseError(http.StatusInternalServerError, resp.Header, []byte(data)), true
	}
	return StreamEvent{}, nil, false // question.created and events to come
}
