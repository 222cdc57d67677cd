package apidocs

import (
	"html"
	"html/template"
	"regexp"
	"strings"
)

// The document's descriptions are CommonMark; the reference renders the
// part of it they use: paragraphs, "##" headings, "-" and "1." lists,
// `code` and **strong**. Everything is escaped first, so a description
// can add no markup of its own.

var (
	codeSpan   = regexp.MustCompile("`([^`]+)`")
	strongSpan = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	olItem     = regexp.MustCompile(`^\d+\. `)
)

// inline escapes s and renders its code and strong spans.
func inline(s string) string {
	s = html.EscapeString(s)
	s = codeSpan.ReplaceAllString(s, "<code>$1</code>")
	return strongSpan.ReplaceAllString(s, "<strong>$1</strong>")
}

// markdown renders s's blocks.
func markdown(s string) template.HTML {
	var b strings.Builder
	for _, block := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n\n") {
		block = strings.TrimSpace(block)
		switch {
		case block == "":
		case strings.HasPrefix(block, "### "):
			b.WriteString("<h4>" + inline(strings.TrimPrefix(block, "### ")) + "</h4>\n")
		case strings.HasPrefix(block, "## "):
			b.WriteString("<h3>" + inline(strings.TrimPrefix(block, "## ")) + "</h3>\n")
		case strings.HasPrefix(block, "- "):
			list(&b, "ul", block, func(line string) (string, bool) { return strings.CutPrefix(line, "- ") })
		case olItem.MatchString(block):
			list(&b, "ol", block, func(line string) (string, bool) {
				if m := olItem.FindString(line); m != "" {
					return line[len(m):], true
				}
				return line, false
			})
		default:
			b.WriteString("<p>" + inline(strings.Join(strings.Fields(block), " ")) + "</p>\n")
		}
	}
	return template.HTML(b.String()) // every piece of text went through inline
}

// list writes block as a list: item says whether a line starts an item (and
// its text); other lines continue the item before.
func list(b *strings.Builder, tag, block string, item func(string) (string, bool)) {
	var items []string
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		if text, ok := item(line); ok || len(items) == 0 {
			items = append(items, text)
			continue
		}
		items[len(items)-1] += " " + line
	}
	b.WriteString("<" + tag + ">")
	for _, it := range items {
		b.WriteString("<li>" + inline(it) + "</li>")
	}
	b.WriteString("</" + tag + ">\n")
}
