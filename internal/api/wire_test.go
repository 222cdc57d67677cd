package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/agentapi/agentapi/client"
)

// clientShapeProblem decodes a JSON response into the public client's
// type for it with unknown fields refused, so that every field the API
// writes (through internal/wire and the append encoders) has a home in the
// client: a field added to one and not the other fails the suite.
// openAPIProblem runs it on every exchange of the package's tests, once
// the exchange matched the document; where names the request.
func clientShapeProblem(ops []openAPIOp, x exchange, where string) string {
	ct, _, _ := mime.ParseMediaType(x.header.Get("Content-Type"))
	if ct != "application/json" || len(x.resp) == 0 || x.req.Method == http.MethodHead {
		return ""
	}
	op, _ := matchOp(ops, x.req.Method, x.req.URL.Path)
	v := clientShape(op.ID, x.status)
	if v == nil {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(x.resp))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Sprintf("%s: the %d response of %s does not decode into the client's %T: %v\nbody %s", where, x.status, op.ID, v, err, x.resp)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Sprintf("%s: the %d response of %s has more than one JSON value: %s", where, x.status, op.ID, x.resp)
	}
	return ""
}

// clientError is the error envelope as client.Error reads it (client's
// parseError): these four fields, the entries client.FieldError.
type clientError struct {
	Error struct {
		Code       string              `json:"code"`
		Message    string              `json:"message"`
		Errors     []client.FieldError `json:"errors"`
		ExistingID string              `json:"existing_id"`
	} `json:"error"`
}

// clientPage is a page of agents as client.ListAgents reads it.
type clientPage struct {
	Data []client.Agent `json:"data"`
	Meta struct {
		Limit   int     `json:"limit"`
		Next    *string `json:"next"`
		HasMore bool    `json:"has_more"`
	} `json:"meta"`
}

// clientList is a page of another collection as the client's listCall
// reads it.
type clientList[T any] struct {
	Data []T `json:"data"`
	Meta struct {
		Limit   int     `json:"limit"`
		Next    *string `json:"next"`
		HasMore bool    `json:"has_more"`
	} `json:"meta"`
}

type clientData[T any] struct {
	Data T `json:"data"`
}

// clientShape is what the client decodes the response of operation id
// with status into; nil for the OpenAPI document itself.
func clientShape(id string, status int) any {
	if status >= 300 {
		return &clientError{}
	}
	switch id {
	case "getMe":
		return &clientData[client.Key]{}
	case "listAgents":
		return &clientPage{}
	case "createAgent", "getAgent", "updateAgent", "setAgentEnabled":
		return &clientData[client.Agent]{}
	case "getAgentStats":
		return &clientData[client.Stats]{}
	case "askAgent":
		return &clientData[client.Answer]{}
	case "listEvents":
		return &clientList[client.Event]{}
	case "getEvent", "sendTestEvent":
		return &clientData[client.Event]{}
	case "listWebhookEndpoints":
		return &clientList[client.WebhookEndpoint]{}
	case "createWebhookEndpoint", "getWebhookEndpoint", "updateWebhookEndpoint", "rotateWebhookSecret":
		return &clientData[client.WebhookEndpoint]{}
	case "listWebhookDeliveries":
		return &clientList[client.WebhookAttempt]{}
	}
	return nil
}
