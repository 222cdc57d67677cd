// Package llm owns the conversation with a language model behind the
// OpenAI-compatible Chat Completions protocol (OpenAI, Azure OpenAI, vLLM,
// llama.cpp's server, Ollama): building the message list for an AI agent's
// question, sending it, and reducing every way that can go wrong to an
// Error whose text is safe to log.
package llm

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Message is one entry of a Chat Completions conversation.
type Message struct {
	Role    string `json:"role"` // "system", "user" or "assistant"
	Content string `json:"content"`
}

// Turn is an earlier question of a conversation and the answer it got.
type Turn struct{ Question, Answer string }

// MaxContextChars bounds the earlier turns sent with a question
// (decisions.md, "Streaming answers"): the most recent turns whose questions
// and answers together fit in this many characters (code points).
const MaxContextChars = 24000

// Conversation builds the messages for a question asked of an AI agent: its
// instructions as the system message (omitted when blank), the most recent
// earlier turns that fit in MaxContextChars as user/assistant pairs in
// order, then the new question.
func Conversation(instructions string, turns []Turn, question string) []Message {
	turns = recentTurns(turns, MaxContextChars)
	msgs := make([]Message, 0, 2*len(turns)+2)
	if strings.TrimSpace(instructions) != "" {
		msgs = append(msgs, Message{Role: "system", Content: instructions})
	}
	for _, t := range turns {
		msgs = append(msgs,
			Message{Role: "user", Content: t.Question},
			Message{Role: "assistant", Content: t.Answer})
	}
	return append(msgs, Message{Role: "user", Content: question})
}

// recentTurns returns the longest tail of turns whose text fits in budget
// characters. It stops at the first turn that does not fit, so the model
// never sees a conversation with a hole in it.
func recentTurns(turns []Turn, budget int) []Turn {
	used := 0
	for i := len(turns) - 1; i >= 0; i-- {
		used += utf8.RuneCountInString(turns[i].Question) + utf8.RuneCountInString(turns[i].Answer)
		if used > budget {
			return turns[i+1:]
		}
	}
	return turns
}

// Config says which model to ask and how.
type Config struct {
	// BaseURL is the API root, e.g. https://api.openai.com/v1 or
	// http://127.0.0.1:11434/v1; {BaseURL}/chat/completions is called.
	BaseURL string
	Model   string
	// APIKey is sent as a bearer token when set; local servers need none.
	APIKey string
	// Timeout bounds a whole completion, reading the answer included.
	// Zero means DefaultTimeout.
	Timeout time.Duration
	// HTTPClient is used as given when set; see New for the default.
	HTTPClient *http.Client
}

// DefaultTimeout bounds a completion when Config.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// maxResponseBytes caps an answer. A non-streamed completion is a few KiB;
// anything near this is a misbehaving peer, not an answer.
const maxResponseBytes = 4 << 20

// maxDrainBytes is how much of an unwanted body is read so the connection
// can go back to the pool; past it, closing the connection is cheaper.
const maxDrainBytes = 64 << 10

// errOwnDeadline marks the client's own timeout, to tell it apart from the
// caller's context ending.
var errOwnDeadline = errors.New("llm: own deadline")

// Client asks one model. It is safe for concurrent use.
type Client struct {
	endpoint string
	model    string
	auth     string // the whole Authorization value, or empty
	timeout  time.Duration
	http     *http.Client
}

// New checks cfg and returns a client for it.
func New(cfg Config) (*Client, error) {
	// Parse errors are not wrapped: they quote the URL, which may carry
	// credentials, and this message goes to the terminal.
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("llm: base URL must be an absolute http or https URL")
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("llm: model is required")
	}
	if cfg.Timeout < 0 {
		return nil, errors.New("llm: timeout must not be negative")
	}
	u.Fragment, u.RawFragment = "", ""
	c := &Client{
		// JoinPath keeps a query such as Azure's ?api-version= in place and
		// copes with a trailing slash on the base.
		endpoint: u.JoinPath("chat", "completions").String(),
		model:    cfg.Model,
		timeout:  cmp.Or(cfg.Timeout, DefaultTimeout),
		http:     cfg.HTTPClient,
	}
	if cfg.APIKey != "" {
		c.auth = "Bearer " + cfg.APIKey
	}
	if c.http == nil {
		c.http = defaultHTTPClient()
	}
	return c, nil
}

// defaultHTTPClient bounds connecting and the TLS handshake; the whole
// exchange is bounded by Complete's context. It follows no redirects: an API
// endpoint that redirects is misconfigured, and following would turn POST
// into GET or resend the key elsewhere.
func defaultHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	// Every question goes to the same host; the default of 2 idle
	// connections would make busy periods dial again and again.
	t.MaxIdleConnsPerHost = 32
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &http.Client{Transport: t, CheckRedirect: noRedirect}
}

type chatRequest struct {
	Model    string    `json:"model"`
	Messages []Message `json:"messages"`
	Stream   bool      `json:"stream"`
}

type chatResponse struct {
	Choices []struct {
		Message struct {
			// A pointer, because tool-call and refusal answers carry null.
			Content *string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
}

// Complete sends msgs and returns the assistant's reply. The request is bound
// to ctx, so a caller who goes away aborts it. Every failure of the exchange
// is an *Error.
func (c *Client) Complete(ctx context.Context, msgs []Message) (string, error) {
	return c.exchange(ctx, msgs, false, func(reqCtx context.Context, resp *http.Response) (string, error) {
		if !isJSON(resp.Header.Get("Content-Type")) {
			drain(resp.Body)
			return "", &Error{Kind: KindMalformed, msg: ErrMalformed.Error() + ": not JSON"}
		}
		return c.readAnswer(ctx, reqCtx, resp)
	})
}

// exchange posts msgs to the model (as a streamed request when stream is
// set) and hands a 2xx response to read, under the request's own context
// (ctx bounded by the client's timeout); the body is closed afterwards.
// Sending failures and other statuses are classified here, as *Error.
func (c *Client) exchange(ctx context.Context, msgs []Message, stream bool, read func(reqCtx context.Context, resp *http.Response) (string, error)) (string, error) {
	if len(msgs) == 0 {
		return "", errors.New("llm: no messages to send")
	}
	body, err := json.Marshal(chatRequest{Model: c.model, Messages: msgs, Stream: stream})
	if err != nil {
		return "", fmt.Errorf("llm: encode request: %w", err)
	}
	reqCtx, cancel := context.WithTimeoutCause(ctx, c.timeout, errOwnDeadline)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("llm: build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream, application/json")
	}
	req.Header.Set("User-Agent", "agentapi")
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", c.exchangeError(ctx, reqCtx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		drain(resp.Body)
		return "", &Error{Kind: KindStatus, Status: resp.StatusCode,
			msg: "llm: provider answered status " + strconv.Itoa(resp.StatusCode)}
	}
	return read(reqCtx, resp)
}

// readAnswer reads a JSON completion, bounded by maxResponseBytes, and
// returns its reply.
func (c *Client) readAnswer(ctx, reqCtx context.Context, resp *http.Response) (string, error) {
	if resp.ContentLength > maxResponseBytes {
		return "", &Error{Kind: KindTooLarge, msg: ErrTooLarge.Error()}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return "", c.exchangeError(ctx, reqCtx, err)
	}
	if len(data) > maxResponseBytes {
		return "", &Error{Kind: KindTooLarge, msg: ErrTooLarge.Error()}
	}
	return parseResponse(data)
}

// parseResponse extracts the first choice's text. Surrounding whitespace is
// dropped: models often open with blank lines, which nobody wants stored.
func parseResponse(data []byte) (string, error) {
	var out chatResponse
	if err := json.Unmarshal(data, &out); err != nil {
		// The decoder's message may quote the body; it is not kept.
		return "", &Error{Kind: KindMalformed, msg: ErrMalformed.Error()}
	}
	if len(out.Choices) == 0 {
		return "", &Error{Kind: KindEmpty, msg: ErrEmpty.Error() + ": no choices"}
	}
	content := out.Choices[0].Message.Content
	if content == nil || strings.TrimSpace(*content) == "" {
		return "", &Error{Kind: KindEmpty, msg: ErrEmpty.Error() + ": empty content"}
	}
	return strings.TrimSpace(*content), nil
}

// isJSON accepts application/json and the +json types, with any parameters.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

func drain(body io.Reader) {
	_, _ = io.CopyN(io.Discard, body, maxDrainBytes)
}
