package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode"
)

// maxStreamLine caps one line of a streamed answer. A Chat Completions
// chunk is a few hundred bytes; a line this long is a misbehaving peer, and
// reading it whole would let the peer decide how much memory we hold.
const maxStreamLine = 256 << 10

// errStopped marks onDelta refusing more: the caller stopped listening.
var errStopped = errors.New("llm: caller stopped reading the stream")

type streamChunk struct {
	Choices []struct {
		Delta struct {
			Content *string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	// Some servers report a failure inside an already started stream.
	Error json.RawMessage `json:"error"`
}

// Stream asks the model for a streamed reply (Chat Completions with
// "stream": true) and calls onDelta with each piece of text as it arrives,
// leading whitespace of the reply left out. It returns the whole reply,
// trimmed like Complete's. onDelta returning an error ends the exchange:
// Stream then reports KindCanceled wrapping that error. Every failure of the
// exchange is an *Error, classified like Complete's; the reply is bounded
// like Complete's, and so is each line the peer sends.
//
// A peer that ignores "stream" and answers one JSON completion is accepted:
// its reply is passed to onDelta in one piece.
func (c *Client) Stream(ctx context.Context, msgs []Message, onDelta func(string) error) (string, error) {
	return c.exchange(ctx, msgs, true, func(reqCtx context.Context, resp *http.Response) (string, error) {
		ct := resp.Header.Get("Content-Type")
		if isJSON(ct) {
			answer, err := c.readAnswer(ctx, reqCtx, resp)
			if err != nil {
				return "", err
			}
			if err := onDelta(answer); err != nil {
				return "", c.streamError(ctx, reqCtx, fmt.Errorf("%w: %w", errStopped, err))
			}
			return answer, nil
		}
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "text/event-stream" {
			drain(resp.Body)
			return "", &Error{Kind: KindMalformed, msg: ErrMalformed.Error() + ": not an event stream"}
		}
		r := &streamReader{onDelta: onDelta}
		if err := r.read(resp.Body); err != nil {
			return "", c.streamError(ctx, reqCtx, err)
		}
		answer := strings.TrimSpace(r.answer.String())
		if answer == "" {
			return "", &Error{Kind: KindEmpty, msg: ErrEmpty.Error() + ": empty content"}
		}
		return answer, nil
	})
}

// streamError classifies a failure while reading a stream: an *Error the
// reader made stands; the caller refusing deltas is KindCanceled; anything
// else is the exchange failing.
func (c *Client) streamError(ctx, reqCtx context.Context, err error) error {
	var le *Error
	if errors.As(err, &le) {
		return le
	}
	if errors.Is(err, errStopped) {
		return &Error{Kind: KindCanceled, msg: errStopped.Error(), cause: err}
	}
	return c.exchangeError(ctx, reqCtx, err)
}

// streamReader parses a Chat Completions event stream: "data:" lines
// carrying chunks, ended by "data: [DONE]". Other fields and comments are
// ignored, as server-sent events require.
type streamReader struct {
	onDelta func(string) error
	answer  strings.Builder
	started bool // a non-space character was passed on
}

func (r *streamReader) read(body io.Reader) error {
	br := bufio.NewReaderSize(body, 4096)
	for {
		line, err := readLine(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				// The stream ended without [DONE]: the peer went away.
				return io.ErrUnexpectedEOF
			}
			return err
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimPrefix(data, []byte(" "))
		if string(bytes.TrimSpace(data)) == "[DONE]" {
			return nil
		}
		if err := r.chunk(data); err != nil {
			return err
		}
	}
}

// readLine returns one line without its end (LF, CRLF), at most
// maxStreamLine bytes long.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > maxStreamLine {
			return nil, &Error{Kind: KindTooLarge, msg: ErrTooLarge.Error() + ": stream line too long"}
		}
		line = append(line, frag...)
		if err == nil {
			return bytes.TrimRight(line, "\r\n"), nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

func (r *streamReader) chunk(data []byte) error {
	var ch streamChunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return &Error{Kind: KindMalformed, msg: ErrMalformed.Error() + ": bad stream chunk"}
	}
	if len(ch.Error) > 0 && string(ch.Error) != "null" {
		return &Error{Kind: KindStatus, msg: "llm: provider reported an error in its stream"}
	}
	if len(ch.Choices) == 0 || ch.Choices[0].Delta.Content == nil {
		return nil // a role announcement, a usage report, a keep-alive
	}
	text := *ch.Choices[0].Delta.Content
	if r.answer.Len()+len(text) > maxResponseBytes {
		return &Error{Kind: KindTooLarge, msg: ErrTooLarge.Error()}
	}
	r.answer.WriteString(text)
	if !r.started {
		text = strings.TrimLeftFunc(text, unicode.IsSpace)
		if text == "" {
			return nil
		}
		r.started = true
	}
	if err := r.onDelta(text); err != nil {
		return fmt.Errorf("%w: %w", errStopped, err)
	}
	return nil
}
