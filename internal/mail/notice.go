package mail

import (
	"bytes"
	"encoding/json"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/wire"
)

// Notice is what an event's email says: its subject and its two parts.
type Notice struct {
	Subject, Text, HTML string
}

// Mailable reports whether an event is mailed (domain.Mailed).
func Mailable(typ domain.EventType, extra json.RawMessage) bool { return domain.Mailed(typ, extra) }

// notice is a message's content before rendering, as text: the HTML part
// escapes every value of it.
type notice struct {
	Subject string
	Intro   []string // paragraphs
	Facts   [][2]string
	Todo    []string
	Link    string // absolute console URL; "" without --public-url
	Where   string // where in the console, said when there is no link
}

// Compose is the notice for ev in the account named account, with links under publicURL (the console's
// base, such as https://agentapi.example.com; "" for none). It reports
// false for an event that is not mailed or whose data it cannot read.
// Only what the API shows of a key is used: its name, prefix and id, never
// a secret.
func Compose(ev domain.Event, account, publicURL string) (Notice, bool) {
	if !Mailable(ev.Type, ev.Extra) {
		return Notice{}, false
	}
	var n notice
	var ok bool
	if ev.Type == domain.EventWebhookEndpointDisabled {
		n, ok = endpointNotice(ev, publicURL)
	} else {
		n, ok = keyNotice(ev, publicURL)
	}
	if !ok {
		return Notice{}, false
	}
	if account != "" {
		n.Facts = append([][2]string{{"Account", account}}, n.Facts...)
	}
	return n.render()
}

type extraFields struct {
	Source struct {
		Type string `json:"type"`
		URL  string `json:"url"`
	} `json:"source"`
	Reason string `json:"reason"`
}

func keyNotice(ev domain.Event, publicURL string) (notice, bool) {
	var k wire.Me
	if err := json.Unmarshal(ev.Data, &k); err != nil || k.ID == "" {
		return notice{}, false
	}
	var x extraFields
	if len(ev.Extra) > 0 {
		_ = json.Unmarshal(ev.Extra, &x)
	}
	n := notice{Facts: [][2]string{{"Key", k.Name}, {"Prefix", k.Prefix}, {"Key id", k.ID}},
		Link:  consoleLink(publicURL, "/console/developers/keys/"+url.PathEscape(k.ID)),
		Where: "Settings → Developers → API keys → " + k.Name}
	switch ev.Type {
	case domain.EventKeyLeaked:
		n.Subject = "API key “" + oneLine(k.Name) + "” was found in public and revoked"
		n.Intro = []string{"GitHub secret scanning found one of your account's API keys in public. " +
			"agentapi revoked it at once: every request made with it is now refused."}
		if x.Source.URL != "" {
			n.Facts = append(n.Facts, [2]string{"Found at", x.Source.URL})
		}
		n.Todo = []string{"Create a new key and put it where the revoked one was used.",
			"Remove the key from where it was published, and treat what it could reach as exposed.",
			"Read the key's logs in the console for requests you do not recognise."}
	case domain.EventKeyAnomaly:
		n.Subject = "Unusual use of API key “" + oneLine(k.Name) + "”"
		n.Intro = []string{"agentapi noticed unusual use of one of your account's API keys: " + anomalyWords(x.Reason) + "."}
		n.Todo = []string{"If you expected this use, there is nothing to do; dismiss the notice on the key's page.",
			"If not, revoke the key in the console, create a new one, and read the key's logs for what was done with it."}
	default: // the 7-day api_key.expiring
		n.Subject = "API key “" + oneLine(k.Name) + "” expires in 7 days"
		when := "in 7 days"
		if k.ExpiresAt != nil {
			if t, err := time.Parse(time.RFC3339, *k.ExpiresAt); err == nil {
				when = "on " + t.UTC().Format("2 January 2006 at 15:04 UTC")
			}
		}
		n.Intro = []string{"One of your account's API keys expires " + when + ". From then on, every request made with it is refused."}
		n.Todo = []string{"Create a new key (or rotate this one) and put it where this one is used, before it expires.",
			"Revoke this key once nothing uses it."}
	}
	return n, true
}

// anomalyWords says what an api_key.anomaly's reason means.
func anomalyWords(reason string) string {
	switch reason {
	case "new_network":
		return "it was used from a network (an IPv4 /24 or IPv6 /48) it had not been used from in the last 30 days"
	case "spike":
		return "it made at least 10 times its usual number of requests in 10 minutes"
	case "after_idle":
		return "it was used again after more than 30 days unused"
	}
	return "its use did not match its history (" + reason + ")"
}

func endpointNotice(ev domain.Event, publicURL string) (notice, bool) {
	var e wire.WebhookEndpoint
	if err := json.Unmarshal(ev.Data, &e); err != nil || e.ID == "" {
		return notice{}, false
	}
	why := "it was disabled"
	if e.DisabledReason != nil {
		switch *e.DisabledReason {
		case domain.DisabledGone:
			why = "it answered 410 Gone"
		case domain.DisabledFailing:
			why = "no delivery to it succeeded for 5 days"
		}
	}
	n := notice{Subject: "Webhook endpoint disabled: " + e.URL,
		Intro: []string{"agentapi stopped sending events to one of your account's webhook endpoints because " + why + "."},
		Facts: [][2]string{{"Endpoint", e.URL}, {"Endpoint id", e.ID}},
		Todo: []string{"Fix the receiver at that URL, then enable the endpoint in the console: deliveries waiting for it resume.",
			"Events are still recorded: read the ones it missed with GET /v1/events, or resend them from its deliveries log."},
		Link:  consoleLink(publicURL, "/console/developers/webhooks/"+url.PathEscape(e.ID)),
		Where: "Settings → Developers → Webhooks"}
	if e.Description != "" {
		n.Facts = append(n.Facts, [2]string{"Description", e.Description})
	}
	return n, true
}

func consoleLink(publicURL, path string) string {
	if publicURL == "" {
		return ""
	}
	return strings.TrimRight(publicURL, "/") + path
}

func (n notice) render() (Notice, bool) {
	var t strings.Builder
	for _, p := range n.Intro {
		t.WriteString(p + "\n\n")
	}
	for _, f := range n.Facts {
		t.WriteString(f[0] + ": " + oneLine(f[1]) + "\n")
	}
	t.WriteString("\nWhat to do:\n")
	for _, s := range n.Todo {
		t.WriteString("- " + s + "\n")
	}
	if n.Link != "" {
		t.WriteString("\nOpen it in the console: " + n.Link + "\n")
	} else {
		t.WriteString("\nIn the console: " + oneLine(n.Where) + "\n")
	}
	t.WriteString("\n" + footer + "\n")
	var h bytes.Buffer
	if err := htmlNotice.Execute(&h, n); err != nil {
		return Notice{}, false
	}
	return Notice{Subject: n.Subject, Text: t.String(), HTML: h.String()}, true
}

// oneLine keeps a value (a key's name, a URL) on its line of the text.
func oneLine(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

const footer = "You get this email as an Owner or Admin of the account. Which notices reach you: in the console, You → Email notices."

var htmlNotice = template.Must(template.New("notice").Funcs(template.FuncMap{"footer": func() string { return footer }}).Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{{.Subject}}</title></head>
<body style="font-family: sans-serif; line-height: 1.5; color: #1a1a1a; max-width: 40em">
{{range .Intro}}<p>{{.}}</p>
{{end}}<table style="border-collapse: collapse">
{{range .Facts}}<tr><th style="text-align: left; padding-right: 1em">{{index . 0}}</th><td><code>{{index . 1}}</code></td></tr>
{{end}}</table>
<p><strong>What to do</strong></p>
<ul>
{{range .Todo}}<li>{{.}}</li>
{{end}}</ul>
{{if .Link}}<p><a href="{{.Link}}">Open it in the console</a></p>{{else}}<p>In the console: {{.Where}}</p>{{end}}
<p style="color: #666; font-size: small">{{footer}}</p>
</body></html>
`))
