package console

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// view is what every page template gets: the signed-in user (nil on the
// sign-in page), the session's CSRF token for forms, which nav entry is
// current, and the page's own data.
type view struct {
	Title  string
	User   *domain.User
	CSRF   string
	Nav    string
	Notice string
	// Warning: a change was saved but other instances may not see it at
	// once (mirrorWarning).
	Warning string
	Page    any
	// Account is the signed-in user's account (its name in the header).
	Account *domain.Account
}

// isolate keeps user text from reordering the text around it where no
// <bdi> can go (a page title, a confirmation dialog): Unicode's first
// strong isolate and pop directional isolate, <bdi> as characters.
func isolate(s string) string { return "\u2068" + s + "\u2069" }

// funcs are the templates' functions; when reads now at render time.
func funcs(now func() time.Time) template.FuncMap {
	return template.FuncMap{
		"isolate": isolate,
		// when shows a time relative to now ("3 min ago", "in 5 days"),
		// with the UTC time on hover and for machines. A *time.Time arrives
		// dereferenced by the template; every page tests it for nil first.
		"when": func(t time.Time) template.HTML {
			t = t.UTC()
			// Only digits, letters, dashes and colons: nothing to escape.
			return template.HTML(`<time datetime="` + t.Format(time.RFC3339) + `" title="` + t.Format("2006-01-02 15:04:05 UTC") + `">` +
				relative(t, now()) + `</time>`)
		},
		"lower":     strings.ToLower,
		"thousands": thousands,
		// invalid marks the form field named want when the form's error is
		// about it: aria-invalid, and the id of the message beside it. Only
		// fixed text and field names from the console's own templates.
		"invalid": func(field, want string) template.HTMLAttr {
			if field == "" || field != want {
				return ""
			}
			return template.HTMLAttr(`aria-invalid="true" aria-describedby="` + want + `-error"`)
		},
	}
}

// relative is t seen from now, rounded down to the largest unit: "just
// now", "3 min ago", "in 2 h", "5 days ago"; past 30 days, t's date.
func relative(t, now time.Time) string {
	d := now.Sub(t).Abs()
	past := !t.After(now)
	var n int
	var unit string
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		n, unit = int(d/time.Minute), " min"
	case d < 24*time.Hour:
		n, unit = int(d/time.Hour), " h"
	case d < 30*24*time.Hour:
		n, unit = int(d/(24*time.Hour)), " days"
	default:
		return t.Format("2006-01-02")
	}
	if n == 1 && unit == " days" {
		unit = " day"
	}
	if past {
		return strconv.Itoa(n) + unit + " ago"
	}
	return "in " + strconv.Itoa(n) + unit
}

// parsePages builds one template per page: the layout (with the key
// form's shared fields and the usage chart) plus that page's "content", so pages cannot clash
// over block names.
func parsePages(now func() time.Time) map[string]*template.Template {
	layout := template.Must(template.New("layout.html").Funcs(funcs(now)).ParseFS(templateFS, "templates/layout.html", "templates/keyform.html", "templates/chart.html",
		"templates/keynotices.html"))
	names, _ := fs.Glob(templateFS, "templates/*.html") // only a bad pattern fails
	pages := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" || name == "keyform" || name == "chart" || name == "keynotices" {
			continue
		}
		pages[name] = template.Must(template.Must(layout.Clone()).ParseFS(templateFS, n))
	}
	return pages
}

// notices are the fixed messages a redirect may ask for with ?done=; the
// query never carries text of its own into the page.
var notices = map[string]string{
	"password":         "Your password is changed. Other sessions of yours were signed out.",
	"revoked":          "The key is revoked. Requests with it are refused from now on.",
	"notice-dismissed": "The notice is dismissed.",
	"edited":           "The key's changes are saved. Its next request gets them.",
	"deactivated":      "The user is deactivated and signed out everywhere.",
	"role":             "The role is changed. It applies from their next page.",
	"reactivated":      "The user is reactivated: they sign in with the password they had.",
	"instructions":     "The instructions are saved.",
	"agent-created":    "The AI agent is created and enabled.",
	"agent-renamed":    "The AI agent is renamed.",
	"agent-enabled":    "The AI agent is enabled: it answers questions again.",
	"agent-disabled":   "The AI agent is disabled: questions to it are refused until it is enabled.",
	"webhook-edited":   "The endpoint's changes are saved. Its next delivery uses them.",
	"webhook-enabled":  "The endpoint is enabled: events are delivered to it again, from now on.",
	"webhook-disabled": "The endpoint is disabled: no events are delivered to it until it is enabled.",
	"webhook-test":     "A webhook.test event is on its way to this endpoint. Its attempt appears in the deliveries log below within seconds: reload to see it.",
	"webhook-resent":   "The event is sent again, with a fresh round of attempts. Reload to see its attempt below.",
	"webhook-deleted":  "The endpoint is deleted, with its deliveries log. Nothing more is sent to it.",
	"policy":           "The key policy is saved. It applies to keys made from now on; existing keys keep their settings.",
	"account-renamed":  "The account is renamed.",
}

// render shows page with status; a template that fails writes nothing and
// is the caller's error.
func (c *Console) render(w http.ResponseWriter, r *http.Request, s *session, status int, page, title string, data any) error {
	v := view{Title: title, Page: data, Nav: navOf(r.URL.Path), Notice: notices[r.URL.Query().Get("done")]}
	if r.URL.Query().Get("mirror") == "late" {
		v.Warning = mirrorWarning
	}
	if s != nil {
		v.User, v.CSRF, v.Account = &s.user, s.csrf, &s.account
	}
	var buf bytes.Buffer
	if err := c.pages[page].ExecuteTemplate(&buf, "layout.html", v); err != nil {
		return fmt.Errorf("render console page %s: %w", page, err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
	return nil
}

func navOf(path string) string {
	for _, p := range []string{"developers/logs", "developers/webhooks", "overview", "account", "developers", "users", "agents", "password", "notifications"} {
		if strings.HasPrefix(path, "/console/"+p) {
			return p
		}
	}
	return ""
}

// renderError shows the error page: status, its text as the heading, and msg.
func (c *Console) renderError(w http.ResponseWriter, r *http.Request, s *session, status int, msg string) {
	if err := c.render(w, r, s, status, "error", http.StatusText(status), pageError{Status: status, Message: msg}); err != nil {
		c.Log.Error("render console error page", "err", err)
		http.Error(w, "The page could not be shown.", http.StatusInternalServerError)
	}
}
