package apidocs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"regexp"
	"strconv"
	"strings"
)

// The view the template renders: everything resolved ($ref followed,
// types spelled out), so the template only lays it out.

type view struct {
	Title, Version, Summary string
	Intro                   template.HTML
	Servers                 []server
	// Contact is the maintainers' name only: the page links nowhere else.
	Contact string
	Tags    []tagView
	Schemas []schemaView
}

type server struct {
	URL         string
	Description template.HTML
}

type tagView struct {
	Name, Anchor string
	Description  template.HTML
	Ops          []opView
}

type opView struct {
	Anchor, Method, Path, Summary string
	Description                   template.HTML
	// Auth says how the operation is called: "API key" or "No key".
	Auth, Scope string
	Deprecated  bool
	Params      []paramView
	Body        *bodyView
	Responses   []responseView
}

type paramView struct {
	Name, In    string
	Required    bool
	Type        template.HTML
	Description template.HTML
	Example     string
}

type bodyView struct {
	Required    bool
	Description template.HTML
	Media       []mediaView
}

type mediaView struct {
	Type     string
	Schema   template.HTML
	Fields   []fieldView // an inline object's properties
	Examples []exampleView
}

type exampleView struct{ Summary, JSON string }

type responseView struct {
	Status      string
	Description template.HTML
	ErrorCodes  []string
	Headers     []paramView
	Media       []mediaView
}

type schemaView struct {
	Name, Anchor string
	Description  template.HTML
	Type         template.HTML
	Rules        string
	Enum         []string
	Fields       []fieldView
	Variants     []template.HTML
	Example      string
}

type fieldView struct {
	Name        string
	Required    bool
	Type        template.HTML
	Rules       string
	Description template.HTML
}

// builder turns a document into its view, failing on a $ref the document
// does not resolve.
type builder struct {
	doc     *document
	schemas map[string]bool
}

func build(doc *document) (view, error) {
	bd := &builder{doc: doc, schemas: map[string]bool{}}
	for _, m := range doc.Components.Schemas {
		bd.schemas[m.Key] = true
	}
	v := view{Title: doc.Info.Title, Version: doc.Info.Version, Summary: doc.Info.Summary,
		Intro: markdown(doc.Info.Description), Contact: doc.Info.Contact.Name}
	for _, s := range doc.Servers {
		v.Servers = append(v.Servers, server{URL: s.URL, Description: markdown(s.Description)})
	}
	tags := map[string]int{}
	for _, t := range doc.Tags {
		tags[t.Name] = len(v.Tags)
		v.Tags = append(v.Tags, tagView{Name: t.Name, Anchor: anchor("tag", t.Name), Description: markdown(t.Description)})
	}
	for _, p := range doc.Paths {
		var item pathItem
		if err := json.Unmarshal(p.Value, &item); err != nil {
			return view{}, fmt.Errorf("path %s: %w", p.Key, err)
		}
		for _, m := range item.operations() {
			op, err := bd.operation(p.Key, m.method, item, m.op)
			if err != nil {
				return view{}, fmt.Errorf("%s %s: %w", m.method, p.Key, err)
			}
			tag := "Other"
			if len(m.op.Tags) > 0 {
				tag = m.op.Tags[0]
			}
			i, ok := tags[tag]
			if !ok {
				i, tags[tag] = len(v.Tags), len(v.Tags)
				v.Tags = append(v.Tags, tagView{Name: tag, Anchor: anchor("tag", tag)})
			}
			v.Tags[i].Ops = append(v.Tags[i].Ops, op)
		}
	}
	for _, m := range doc.Components.Schemas {
		var s schema
		if err := json.Unmarshal(m.Value, &s); err != nil {
			return view{}, fmt.Errorf("schema %s: %w", m.Key, err)
		}
		sv, err := bd.schemaView(m.Key, &s)
		if err != nil {
			return view{}, fmt.Errorf("schema %s: %w", m.Key, err)
		}
		v.Schemas = append(v.Schemas, sv)
	}
	return v, nil
}

var notAnchor = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// anchor is an id attribute for name: letters, digits, _ and - only.
func anchor(kind, name string) string {
	return kind + "-" + strings.Trim(notAnchor.ReplaceAllString(name, "-"), "-")
}

func (bd *builder) operation(path, method string, item pathItem, op *operation) (opView, error) {
	id := op.OperationID
	if id == "" {
		id = method + " " + path
	}
	v := opView{Anchor: anchor("op", id), Method: method, Path: path, Summary: op.Summary,
		Description: markdown(op.Description), Deprecated: op.Deprecated, Auth: "API key"}
	security := op.Security
	if security == nil {
		security = bd.doc.Security
	}
	if len(security) == 0 || (len(security) == 1 && len(security[0]) == 0) {
		v.Auth = "No key"
	}
	if op.Scope != nil {
		v.Scope = *op.Scope
	}
	for _, p := range append(append([]parameter(nil), item.Parameters...), op.Parameters...) {
		pv, err := bd.parameter(p)
		if err != nil {
			return v, err
		}
		v.Params = append(v.Params, pv)
	}
	if op.RequestBody != nil {
		media, err := bd.media(op.RequestBody.Content)
		if err != nil {
			return v, fmt.Errorf("request body: %w", err)
		}
		v.Body = &bodyView{Required: op.RequestBody.Required, Description: markdown(op.RequestBody.Description), Media: media}
	}
	for _, m := range op.Responses {
		rv, err := bd.response(m)
		if err != nil {
			return v, fmt.Errorf("response %s: %w", m.Key, err)
		}
		v.Responses = append(v.Responses, rv)
	}
	return v, nil
}

// ref is the name a $ref gives in section of the components.
func ref(r, section string) (string, error) {
	name, ok := strings.CutPrefix(r, "#/components/"+section+"/")
	if !ok || name == "" {
		return "", fmt.Errorf("unsupported $ref %q", r)
	}
	return name, nil
}

func (bd *builder) parameter(p parameter) (paramView, error) {
	if p.Ref != "" {
		name, err := ref(p.Ref, "parameters")
		if err != nil {
			return paramView{}, err
		}
		q, ok := bd.doc.Components.Parameters[name]
		if !ok {
			return paramView{}, fmt.Errorf("no parameter %q", name)
		}
		p = q
	}
	t, err := bd.typeOf(p.Schema)
	return paramView{Name: p.Name, In: p.In, Required: p.Required, Type: t, Description: markdown(p.Description), Example: compact(p.Example)}, err
}

func (bd *builder) response(m member) (responseView, error) {
	var r response
	if err := json.Unmarshal(m.Value, &r); err != nil {
		return responseView{}, err
	}
	if r.Ref != "" {
		name, err := ref(r.Ref, "responses")
		if err != nil {
			return responseView{}, err
		}
		q, ok := bd.doc.Components.Responses[name]
		if !ok {
			return responseView{}, fmt.Errorf("no response %q", name)
		}
		r = q
	}
	v := responseView{Status: m.Key, Description: markdown(r.Description), ErrorCodes: r.ErrorCodes}
	for _, h := range r.Headers {
		var hd header
		if err := json.Unmarshal(h.Value, &hd); err != nil {
			return v, err
		}
		if hd.Ref != "" {
			name, err := ref(hd.Ref, "headers")
			if err != nil {
				return v, err
			}
			q, ok := bd.doc.Components.Headers[name]
			if !ok {
				return v, fmt.Errorf("no header %q", name)
			}
			hd = q
		}
		t, err := bd.typeOf(hd.Schema)
		if err != nil {
			return v, err
		}
		v.Headers = append(v.Headers, paramView{Name: h.Key, In: "header", Required: hd.Required, Type: t,
			Description: markdown(hd.Description), Example: compact(hd.Example)})
	}
	var err error
	v.Media, err = bd.media(r.Content)
	return v, err
}

func (bd *builder) media(content ordered) ([]mediaView, error) {
	var out []mediaView
	for _, c := range content {
		var mt mediaType
		if err := json.Unmarshal(c.Value, &mt); err != nil {
			return nil, err
		}
		v, err := bd.mediaOf(c.Key, &mt)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// mediaOf is one media type of a body: its schema, the fields of an
// inline one, and its examples.
func (bd *builder) mediaOf(typ string, mt *mediaType) (mediaView, error) {
	v := mediaView{Type: typ}
	if mt.Schema != nil {
		t, err := bd.typeOf(mt.Schema)
		if err != nil {
			return v, err
		}
		v.Schema = t
		if mt.Schema.Ref == "" {
			if v.Fields, err = bd.fields(mt.Schema); err != nil {
				return v, err
			}
		}
	}
	var err error
	v.Examples, err = examples(mt)
	return v, err
}

// examples are mt's example, then its named examples, each under its
// summary, or its name when it has none.
func examples(mt *mediaType) ([]exampleView, error) {
	var out []exampleView
	if len(mt.Example) > 0 {
		out = append(out, exampleView{Summary: "Example", JSON: indent(mt.Example)})
	}
	for _, e := range mt.Examples {
		var ex example
		if err := json.Unmarshal(e.Value, &ex); err != nil {
			return nil, err
		}
		summary := ex.Summary
		if summary == "" {
			summary = e.Key
		}
		out = append(out, exampleView{Summary: summary, JSON: indent(ex.Value)})
	}
	return out, nil
}

func (bd *builder) schemaView(name string, s *schema) (schemaView, error) {
	v := schemaView{Name: name, Anchor: anchor("schema", name), Description: markdown(s.Description), Rules: rules(s), Example: indent(s.Example)}
	var err error
	if v.Type, err = bd.typeOf(s); err != nil {
		return v, err
	}
	for _, e := range s.Enum {
		v.Enum = append(v.Enum, literal(e))
	}
	for _, alt := range append(append(append([]schema(nil), s.OneOf...), s.AnyOf...), s.AllOf...) {
		t, err := bd.typeOf(&alt)
		if err != nil {
			return v, err
		}
		v.Variants = append(v.Variants, t)
	}
	v.Fields, err = bd.fields(s)
	return v, err
}

// fields are s's properties, required ones marked.
func (bd *builder) fields(s *schema) ([]fieldView, error) {
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	var out []fieldView
	for _, p := range s.Properties {
		var ps schema
		if err := json.Unmarshal(p.Value, &ps); err != nil {
			return nil, fmt.Errorf("property %s: %w", p.Key, err)
		}
		t, err := bd.typeOf(&ps)
		if err != nil {
			return nil, err
		}
		desc := ps.Description
		if ps.Ref == "" && len(ps.Properties) > 0 {
			// An inline object: its fields, one level down.
			var names []string
			for _, q := range ps.Properties {
				names = append(names, "`"+q.Key+"`")
			}
			desc = strings.TrimSpace(desc + " Fields: " + strings.Join(names, ", ") + ".")
		}
		out = append(out, fieldView{Name: p.Key, Required: required[p.Key], Type: t, Rules: rules(&ps), Description: markdown(desc)})
	}
	return out, nil
}

// typeOf spells s's type, linking the schemas it names.
func (bd *builder) typeOf(s *schema) (template.HTML, error) {
	switch {
	case s == nil:
		return "", nil
	case s.Ref != "":
		return bd.refType(s.Ref)
	case len(s.OneOf)+len(s.AnyOf)+len(s.AllOf) > 0:
		return bd.alternatives(s)
	}
	return bd.primitive(s)
}

// refType is a link to the schema that target names.
func (bd *builder) refType(target string) (template.HTML, error) {
	name, err := ref(target, "schemas")
	if err != nil {
		return "", err
	}
	if !bd.schemas[name] {
		return "", fmt.Errorf("no schema %q", name)
	}
	n := html.EscapeString(name)
	return template.HTML(`<a href="#` + anchor("schema", name) + `">` + n + `</a>`), nil
}

// alternatives spells s's oneOf, anyOf and allOf types: "a or b", or
// "a and b" when s has allOf.
func (bd *builder) alternatives(s *schema) (template.HTML, error) {
	var parts []string
	for _, a := range append(append(append([]schema(nil), s.OneOf...), s.AnyOf...), s.AllOf...) {
		t, err := bd.typeOf(&a)
		if err != nil {
			return "", err
		}
		parts = append(parts, string(t))
	}
	sep := " or "
	if len(s.AllOf) > 0 {
		sep = " and "
	}
	return template.HTML(strings.Join(parts, sep)), nil
}

// primitive spells s's type names ("any" when it has none), joined by "or".
func (bd *builder) primitive(s *schema) (template.HTML, error) {
	names, err := typeNames(s.Type)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, n := range names {
		t, err := bd.typeName(s, n)
		if err != nil {
			return "", err
		}
		parts = append(parts, t)
	}
	if len(parts) == 0 {
		return "any", nil
	}
	return template.HTML(strings.Join(parts, " or ")), nil
}

// typeNames reads a schema's type: a name or a list of names.
func typeNames(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var names []string
	if err := json.Unmarshal(raw, &names); err != nil {
		return nil, fmt.Errorf("type %s", raw)
	}
	return names, nil
}

// typeName spells the type name n of s, HTML-escaped: an array's items,
// or a format in brackets.
func (bd *builder) typeName(s *schema, n string) (string, error) {
	switch {
	case n == "array" && s.Items != nil:
		t, err := bd.typeOf(s.Items)
		if err != nil {
			return "", err
		}
		return "array of " + string(t), nil
	case s.Format != "" && n != "null":
		return html.EscapeString(n + " (" + s.Format + ")"), nil
	}
	return html.EscapeString(n), nil
}

// rules are s's constraints in words.
func rules(s *schema) string {
	var r []string
	num := func(label string, v *float64) {
		if v != nil {
			r = append(r, label+" "+strconv.FormatFloat(*v, 'f', -1, 64))
		}
	}
	count := func(label string, v *int64) {
		if v != nil {
			r = append(r, label+" "+strconv.FormatInt(*v, 10))
		}
	}
	count("min length", s.MinLength)
	count("max length", s.MaxLength)
	num("minimum", s.Minimum)
	num("maximum", s.Maximum)
	count("min items", s.MinItems)
	count("max items", s.MaxItems)
	if s.Pattern != "" {
		r = append(r, "pattern "+s.Pattern)
	}
	if s.Const != nil {
		r = append(r, "always "+literal(s.Const))
	}
	if s.Default != nil {
		r = append(r, "default "+literal(s.Default))
	}
	if len(s.Enum) > 0 && len(s.Enum) <= 8 {
		var vs []string
		for _, e := range s.Enum {
			vs = append(vs, literal(e))
		}
		r = append(r, "one of "+strings.Join(vs, ", "))
	}
	return strings.Join(r, "; ")
}

// literal is v as JSON.
func literal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// indent is raw JSON indented as written (members in their order).
func indent(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// compact is raw JSON on one line; a string example is shown bare.
func compact(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
