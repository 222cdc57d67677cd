package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"
)

// The document describes a streamed answer's events in the x-events of its
// text/event-stream media type: event name to the schema of its data. An
// extension is no schema a validator reads, so sseProblem checks them: it
// is part of openAPIProblem, which every exchange of the suite goes
// through, and of TestOpenAPIExamples.

// sseEventSchemas are the x-events schemas of every operation that has
// them, by operation template and method, then event name.
var sseEventSchemas = sync.OnceValues(func() (map[string]map[string]*base.Schema, error) {
	var doc map[string]any
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		return nil, err
	}
	// Each event's schema becomes a component of a copy of the document, so
	// that libopenapi resolves its references like any other schema's.
	comps := doc["components"].(map[string]any)["schemas"].(map[string]any)
	names := map[string]map[string]string{} // op -> event -> component
	for tmpl, item := range doc["paths"].(map[string]any) {
		for method, raw := range item.(map[string]any) {
			op, ok := raw.(map[string]any)
			if !ok {
				continue
			}
			responses, _ := op["responses"].(map[string]any)
			for _, resp := range responses {
				content, _ := resp.(map[string]any)["content"].(map[string]any)
				sse, _ := content["text/event-stream"].(map[string]any)
				events, _ := sse["x-events"].(map[string]any)
				for event, schema := range events {
					key := strings.ToUpper(method) + " " + tmpl
					if names[key] == nil {
						names[key] = map[string]string{}
					}
					name := fmt.Sprintf("SSEEvent%d", len(comps))
					comps[name] = schema
					names[key][event] = name
				}
			}
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	d, err := libopenapi.NewDocument(b)
	if err != nil {
		return nil, err
	}
	m, err := d.BuildV3Model()
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]*base.Schema{}
	for key, events := range names {
		out[key] = map[string]*base.Schema{}
		for event, name := range events {
			out[key][event] = m.Model.Components.Schemas.GetOrZero(name).Schema()
		}
	}
	return out, nil
})

// sseBlock is one block of an event stream: an event or a comment.
type sseBlock struct{ name, data, comment string }

// parseSSE splits a stream as the service writes it: blocks ended by a
// blank line, each either one comment line or exactly an "event:" line and
// one "data:" line. A stream cut short leaves its last block unfinished.
func parseSSE(body string) (blocks []sseBlock, cut bool, problem string) {
	parts := strings.Split(body, "\n\n")
	if last := parts[len(parts)-1]; last != "" {
		cut = true
	}
	for _, part := range parts[:len(parts)-1] {
		lines := strings.Split(part, "\n")
		switch {
		case len(lines) == 1 && strings.HasPrefix(lines[0], ": "):
			blocks = append(blocks, sseBlock{comment: lines[0][2:]})
		case len(lines) == 2 && strings.HasPrefix(lines[0], "event: ") && strings.HasPrefix(lines[1], "data: "):
			blocks = append(blocks, sseBlock{name: lines[0][len("event: "):], data: lines[1][len("data: "):]})
		default:
			return nil, cut, fmt.Sprintf("block %q is neither a comment nor an event line and a data line", part)
		}
	}
	return blocks, cut, ""
}

// sseProblem checks a text/event-stream response: its blocks, the order of
// its events (question.created, answer.delta..., then answer.completed or
// error, nothing after), each event's data against its x-events schema,
// the error's code against the 500 response's x-error-codes, and the
// completed answer against what the stream said. A stream whose client went
// away may stop anywhere.
func sseProblem(op openAPIOp, x exchange) string {
	if !strings.HasPrefix(x.header.Get("Content-Type"), "text/event-stream") {
		return ""
	}
	all, err := sseEventSchemas()
	if err != nil {
		return err.Error()
	}
	schemas := all[op.Method+" "+op.Template]
	if schemas == nil {
		return "an event stream from an operation whose document has no x-events"
	}
	blocks, cut, p := parseSSE(string(x.resp))
	if p != "" {
		return p
	}
	gone := x.req.Context().Err() != nil
	events, p := sseProblemEvents(blocks)
	if p != "" {
		return p
	}
	sv := schema_validation.NewSchemaValidator(config.WithFormatAssertions())
	var stream sseProblemStream
	for i, ev := range events {
		schema, ok := schemas[ev.name]
		if !ok {
			return fmt.Sprintf("event %q is not among the x-events", ev.name)
		}
		if valid, errs := sv.ValidateSchemaString(schema, ev.data); !valid {
			return fmt.Sprintf("%s data %s does not match its schema:\n%s", ev.name, ev.data, describe(errs))
		}
		if p := stream.next(op, x, i, i == len(events)-1, ev); p != "" {
			return p
		}
	}
	if gone {
		return ""
	}
	if cut || len(events) == 0 || (events[len(events)-1].name != "answer.completed" && events[len(events)-1].name != "error") {
		return "the stream ends without answer.completed or error (" + strconv.Itoa(len(events)) + " events)"
	}
	return ""
}

// sseProblemEvents are a stream's events, without its comments, which
// must be keep-alives.
func sseProblemEvents(blocks []sseBlock) ([]sseBlock, string) {
	var events []sseBlock
	for _, b := range blocks {
		if b.comment == "" {
			events = append(events, b)
		} else if b.comment != "keep-alive" {
			return nil, fmt.Sprintf("comment %q (only keep-alive is sent)", b.comment)
		}
	}
	return events, ""
}

// sseProblemQuestion is what question.created and answer.completed carry
// of the question.
type sseProblemQuestion struct {
	ID   string `json:"id"`
	Data struct {
		ID     string `json:"id"`
		Answer string `json:"answer"`
	} `json:"data"`
}

// sseProblemStream is what sseProblem knows of a stream so far: the
// question created, the text of the deltas.
type sseProblemStream struct {
	created, completed sseProblemQuestion
	text               strings.Builder
}

// next checks the stream's i-th event (last when it is the last) comes in
// order: question.created first, then answer.delta..., then
// answer.completed (the question, with the deltas' text) or error (a code
// of the 500 response's x-error-codes).
func (s *sseProblemStream) next(op openAPIOp, x exchange, i int, last bool, ev sseBlock) string {
	switch {
	case ev.name == "question.created" && i == 0:
		_ = json.Unmarshal([]byte(ev.data), &s.created)
	case ev.name == "answer.delta" && i > 0:
		var d struct{ Delta string }
		_ = json.Unmarshal([]byte(ev.data), &d)
		s.text.WriteString(d.Delta)
	case ev.name == "answer.completed" && i > 0 && last:
		_ = json.Unmarshal([]byte(ev.data), &s.completed)
		if s.completed.Data.ID != s.created.ID || s.completed.Data.Answer != strings.TrimSpace(s.text.String()) {
			return fmt.Sprintf("answer.completed %s is not the question %s with the deltas' text %q", ev.data, s.created.ID, s.text.String())
		}
	case ev.name == "error" && i > 0 && last:
		ex := exchange{req: x.req, status: http.StatusInternalServerError, header: x.header, resp: []byte(ev.data)}
		if p := bodyRuleProblem(op, ex); p != "" {
			return "error event: " + p
		}
	default:
		return fmt.Sprintf("event %d, %s, out of order (question.created, answer.delta..., then answer.completed or error)", i, ev.name)
	}
	return ""
}

// TestSSEProblemCatchesDrift feeds sseProblem a valid stream and streams
// each broken in one way, and asserts it passes the one and fails the rest.
func TestSSEProblemCatchesDrift(t *testing.T) {
	op, ok := matchOp(openAPIOps(t), "POST", "/v1/ai-agents/agt_x/questions")
	if !ok {
		t.Fatal("no askAgent")
	}
	const (
		created   = "event: question.created\ndata: {\"id\":\"qst_01m81j18g0ap1ae1tqdq72j2vw\",\"conversation_id\":\"conv_01m81j18g0ap1ae1tqdndy630r\",\"created_at\":\"2026-11-22T12:00:00.000Z\"}\n\n"
		delta     = "event: answer.delta\ndata: {\"delta\":\"Hi there\"}\n\n"
		completed = "event: answer.completed\ndata: {\"data\":{\"id\":\"qst_01m81j18g0ap1ae1tqdq72j2vw\",\"conversation_id\":\"conv_01m81j18g0ap1ae1tqdndy630r\",\"question\":\"q\",\"answer\":\"Hi there\",\"created_at\":\"2026-11-22T12:00:00.000Z\",\"answer_ms\":5}}\n\n"
		failed    = "event: error\ndata: {\"error\":{\"code\":\"server_error\",\"message\":\"The model failed.\"}}\n\n"
		alive     = ": keep-alive\n\n"
	)
	check := func(body string) string {
		x := exchange{req: httptest.NewRequest("POST", "/v1/ai-agents/agt_x/questions", nil), status: 200,
			header: http.Header{"Content-Type": {"text/event-stream"}}, resp: []byte(body)}
		return sseProblem(op, x)
	}
	for _, good := range []string{created + delta + completed, created + alive + delta + alive + completed, created + failed, created + delta + failed} {
		if p := check(good); p != "" {
			t.Errorf("a valid stream fails: %s\n%s", p, good)
		}
	}
	for _, c := range []struct{ name, body, want string }{
		{"created without created_at", strings.Replace(created, `,"created_at":"2026-11-22T12:00:00.000Z"`, "", 1) + delta + completed, "does not match its schema"},
		{"created_at not a timestamp", strings.Replace(created, "12:00:00.000Z", "12:00:00Z", 1) + delta + completed, "does not match its schema"},
		{"delta with an extra field", created + strings.Replace(delta, `"}`, `","n":1}`, 1) + completed, "does not match its schema"},
		{"empty delta", created + strings.Replace(delta, "Hi there", "", 1) + completed, "does not match its schema"},
		{"completed without answer_ms", created + delta + strings.Replace(completed, `,"answer_ms":5`, "", 1), "does not match its schema"},
		{"completed with other text", created + delta + strings.Replace(completed, "Hi there", "Hi", 1), "is not the question"},
		{"completed for another question", created + delta + strings.Replace(completed, "qst_01m81j18g0ap1ae1tqdq72j2vw", "qst_01m81j18g0ap1ae1tqdq72j2vx", 1), "is not the question"},
		{"error with a code the 500 has not", created + strings.Replace(failed, "server_error", "not_found", 1), "x-error-codes"},
		{"error not an envelope", created + "event: error\ndata: {\"code\":\"server_error\"}\n\n", "does not match its schema"},
		{"delta first", delta + created + completed, "out of order"},
		{"two completions", created + delta + completed + completed, "out of order"},
		{"no end", created + delta, "ends without"},
		{"cut short", created + delta + completed[:20], "ends without"},
		{"nothing", "", "ends without"},
		{"unknown event", created + "event: answer.done\ndata: {}\n\n" + completed, "not among the x-events"},
		{"other comment", created + ": hello\n\n" + delta + completed, "only keep-alive"},
		{"two data lines", created + "event: answer.delta\ndata: {\"delta\":\"a\"}\ndata: {}\n\n" + completed, "neither a comment"},
	} {
		if p := check(c.body); !strings.Contains(p, c.want) {
			t.Errorf("%s: got %q, want a problem saying %q", c.name, p, c.want)
		}
	}
}
