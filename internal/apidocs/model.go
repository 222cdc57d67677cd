package apidocs

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The parts of an OpenAPI 3.1 document the reference shows. Objects whose
// order the author chose (paths, properties, responses, examples) are read
// in document order; examples stay raw JSON so they read as written.

// ordered is a JSON object's members in document order.
type ordered []member

type member struct {
	Key   string
	Value json.RawMessage
}

func (o *ordered) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("apidocs: want an object, got %s", truncate(b))
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		*o = append(*o, member{Key: t.(string), Value: v})
	}
	_, err := dec.Token()
	return err
}

func truncate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

type document struct {
	OpenAPI string `json:"openapi"`
	Info    struct {
		Title       string `json:"title"`
		Version     string `json:"version"`
		Summary     string `json:"summary"`
		Description string `json:"description"`
		Contact     struct {
			Name string `json:"name"`
			URL  string `json:"url"`
		} `json:"contact"`
	} `json:"info"`
	Servers []struct {
		URL         string `json:"url"`
		Description string `json:"description"`
	} `json:"servers"`
	Tags []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"tags"`
	Security   []map[string][]any `json:"security"`
	Paths      ordered            `json:"paths"`
	Components struct {
		SecuritySchemes map[string]struct {
			Type        string `json:"type"`
			Scheme      string `json:"scheme"`
			Description string `json:"description"`
		} `json:"securitySchemes"`
		Parameters map[string]parameter `json:"parameters"`
		Headers    map[string]header    `json:"headers"`
		Responses  map[string]response  `json:"responses"`
		Schemas    ordered              `json:"schemas"`
	} `json:"components"`
}

type pathItem struct {
	Summary     string      `json:"summary"`
	Description string      `json:"description"`
	Parameters  []parameter `json:"parameters"`
	Get         *operation  `json:"get"`
	Put         *operation  `json:"put"`
	Post        *operation  `json:"post"`
	Delete      *operation  `json:"delete"`
	Options     *operation  `json:"options"`
	Head        *operation  `json:"head"`
	Patch       *operation  `json:"patch"`
	Trace       *operation  `json:"trace"`
}

// operations are the item's operations in the order the reference lists them.
func (p pathItem) operations() []struct {
	method string
	op     *operation
} {
	var out []struct {
		method string
		op     *operation
	}
	for _, m := range []struct {
		method string
		op     *operation
	}{{"GET", p.Get}, {"HEAD", p.Head}, {"POST", p.Post}, {"PUT", p.Put}, {"PATCH", p.Patch},
		{"DELETE", p.Delete}, {"OPTIONS", p.Options}, {"TRACE", p.Trace}} {
		if m.op != nil {
			out = append(out, m)
		}
	}
	return out
}

type operation struct {
	OperationID string             `json:"operationId"`
	Tags        []string           `json:"tags"`
	Summary     string             `json:"summary"`
	Description string             `json:"description"`
	Deprecated  bool               `json:"deprecated"`
	Scope       *string            `json:"x-scope"`
	Security    []map[string][]any `json:"security"`
	Parameters  []parameter        `json:"parameters"`
	RequestBody *requestBody       `json:"requestBody"`
	Responses   ordered            `json:"responses"`
}

type parameter struct {
	Ref         string          `json:"$ref"`
	Name        string          `json:"name"`
	In          string          `json:"in"`
	Required    bool            `json:"required"`
	Description string          `json:"description"`
	Schema      *schema         `json:"schema"`
	Example     json.RawMessage `json:"example"`
}

type header struct {
	Ref         string          `json:"$ref"`
	Description string          `json:"description"`
	Required    bool            `json:"required"`
	Schema      *schema         `json:"schema"`
	Example     json.RawMessage `json:"example"`
}

type requestBody struct {
	Ref         string  `json:"$ref"`
	Description string  `json:"description"`
	Required    bool    `json:"required"`
	Content     ordered `json:"content"`
}

type response struct {
	Ref         string   `json:"$ref"`
	Description string   `json:"description"`
	ErrorCodes  []string `json:"x-error-codes"`
	Headers     ordered  `json:"headers"`
	Content     ordered  `json:"content"`
}

type mediaType struct {
	Schema   *schema         `json:"schema"`
	Example  json.RawMessage `json:"example"`
	Examples ordered         `json:"examples"`
}

type example struct {
	Summary     string          `json:"summary"`
	Description string          `json:"description"`
	Value       json.RawMessage `json:"value"`
}

// schema is a JSON Schema as far as the reference describes it.
type schema struct {
	Ref         string          `json:"$ref"`
	Type        json.RawMessage `json:"type"` // a name or a list of names
	Format      string          `json:"format"`
	Description string          `json:"description"`
	Enum        []any           `json:"enum"`
	Const       any             `json:"const"`
	Items       *schema         `json:"items"`
	Properties  ordered         `json:"properties"`
	Required    []string        `json:"required"`
	OneOf       []schema        `json:"oneOf"`
	AnyOf       []schema        `json:"anyOf"`
	AllOf       []schema        `json:"allOf"`
	MinLength   *int64          `json:"minLength"`
	MaxLength   *int64          `json:"maxLength"`
	Minimum     *float64        `json:"minimum"`
	Maximum     *float64        `json:"maximum"`
	MinItems    *int64          `json:"minItems"`
	MaxItems    *int64          `json:"maxItems"`
	Pattern     string          `json:"pattern"`
	Default     any             `json:"default"`
	Example     json.RawMessage `json:"example"`
}
