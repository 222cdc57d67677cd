package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/agentapi/agentapi/internal/domain"
)

// A command that prints what it read prints it for whoever reads stdout
// (docs/operator-cli.md, Output): a table for a person at a terminal, JSON
// for a program (one object a line), and --json or --table to choose.
//
// A command adds the two flags with e.output(fs), then prints a list with
// printList (or row by row with newRows) or one thing with printOne, giving
// the columns of its table:
//
//	out := e.output(fs)
//	…
//	return printOne(out, accountLine{…}, accountColumns)

// output is where a command prints, and how.
type output struct {
	w        io.Writer
	json     *bool
	table    *bool
	terminal bool
}

// output adds --json and --table to fs.
func (e env) output(fs *flag.FlagSet) *output {
	return &output{
		w:        e.stdout,
		terminal: isTerminal(e.stdout),
		json:     fs.Bool("json", false, "print JSON, one object a line (the default when stdout is not a terminal)"),
		table:    fs.Bool("table", false, "print a table (the default when stdout is a terminal)"),
	}
}

// tabular reports whether to print a table. Both flags at once are refused
// while the command line is parsed (parseFlags).
func (o *output) tabular() bool {
	switch {
	case *o.json:
		return false
	case *o.table:
		return true
	}
	return o.terminal
}

// isTerminal reports whether w is a terminal: a character device other
// than /dev/null (where `> /dev/null` sends it). No ioctl is needed for
// that, nor a dependency.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}

// column is one column of a table: its heading and its cell for v. When
// one thing is shown, an optional column's line is left out if its cell is
// empty (an event's reason, a secret shown only once).
type column[T any] struct {
	head     string
	cell     func(v T) string
	optional bool
}

// rows prints values one at a time: JSON lines at once, or a table whose
// columns are aligned when done flushes it.
type rows[T any] struct {
	o    *output
	cols []column[T]
	tw   *tabwriter.Writer
}

// newRows starts a list; with a table, its heading is written first, so
// that an empty list still shows what it would hold.
func newRows[T any](o *output, cols []column[T]) *rows[T] {
	r := &rows[T]{o: o, cols: cols}
	if o.tabular() {
		r.tw = tabwriter.NewWriter(o.w, 0, 0, 2, ' ', 0)
		heads := make([]string, len(cols))
		for i, c := range cols {
			heads[i] = c.head
		}
		fmt.Fprintln(r.tw, strings.Join(heads, "\t"))
	}
	return r
}

func (r *rows[T]) add(v T) error {
	if r.tw == nil {
		return printJSON(r.o.w, v)
	}
	cells := make([]string, len(r.cols))
	for i, c := range r.cols {
		cells[i] = cellText(c.cell(v))
	}
	_, err := fmt.Fprintln(r.tw, strings.Join(cells, "\t"))
	return err
}

func (r *rows[T]) done() error {
	if r.tw == nil {
		return nil
	}
	if err := r.tw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// printList prints every value of list.
func printList[T any](o *output, list []T, cols []column[T]) error {
	return printSeq(o, func(yield func(T, error) bool) {
		for _, v := range list {
			if !yield(v, nil) {
				return
			}
		}
	}, cols)
}

// printSeq prints every value seq yields, until its first error, which it
// returns; the rows before it are printed.
func printSeq[T any](o *output, seq iter.Seq2[T, error], cols []column[T]) error {
	r := newRows(o, cols)
	for v, err := range seq {
		if err != nil {
			_ = r.done()
			return err
		}
		if err := r.add(v); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	return r.done()
}

// printOne prints v: one JSON object, or a line per column, its heading
// then its cell (a cell of several lines keeps them, indented).
func printOne[T any](o *output, v T, cols []column[T]) error {
	if !o.tabular() {
		return printJSON(o.w, v)
	}
	tw := tabwriter.NewWriter(o.w, 0, 0, 2, ' ', 0)
	for _, c := range cols {
		cell := c.cell(v)
		if c.optional && cell == "" {
			continue
		}
		lines := strings.Split(cell, "\n")
		for i := range lines {
			lines[i] = cellText(lines[i])
		}
		fmt.Fprintf(tw, "%s\t%s\n", c.head, strings.Join(lines, "\n\t"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// cellText is s as one cell: "-" when empty; tabs, line breaks and other
// control characters (an agent's name may hold a terminal's escape codes)
// become spaces.
func cellText(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// printJSON writes v as one line of JSON. '&', '<' and '>' stay as they
// are: the output is read by people and programs, never put in HTML. That
// holds inside what the API sent as it was (an event's data, kept raw),
// whose encoder wrote them as \u0026, \u003c and \u003e.
func printJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if _, err := w.Write(unescapeHTML(buf.Bytes())); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// unescapeHTML turns the escapes \u0026, \u003c and \u003e of encoded
// JSON back into '&', '<' and '>', the same strings; an escaped backslash
// is stepped over whole, so "\\u0026" (a backslash, then "u0026") stays.
func unescapeHTML(b []byte) []byte {
	out := b[:0:0]
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 == len(b) {
			out = append(out, b[i])
			continue
		}
		if c, ok := htmlEscape(b[i+1:]); ok {
			out = append(out, c)
			i += 5
			continue
		}
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}

// htmlEscape reports the character of an escape "u0026", "u003c" or
// "u003e" (either case) at the start of b.
func htmlEscape(b []byte) (byte, bool) {
	if len(b) < 5 || b[0] != 'u' || string(b[1:3]) != "00" {
		return 0, false
	}
	switch strings.ToLower(string(b[3:5])) {
	case "26":
		return '&', true
	case "3c":
		return '<', true
	case "3e":
		return '>', true
	}
	return 0, false
}

// Cell helpers shared by the tables.

// orText is *p, or none when p is nil.
func orText(p *string, none string) string {
	if p == nil {
		return none
	}
	return *p
}

// shortTime is a time as the API writes it (milliseconds, Z) to the
// second, as a table shows it; any other text as it is.
func shortTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format(time.RFC3339)
}

// timeOr is shortTime of *p, or none when p is nil.
func timeOr(p *string, none string) string {
	if p == nil {
		return none
	}
	return shortTime(*p)
}

// joinAny is a list of strings (of any string type) with commas.
func joinAny[S ~string](list []S) string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = string(s)
	}
	return strings.Join(out, ",")
}

// access is a key's scopes as a table shows them: the preset's id when
// they are exactly a preset's, else the scopes.
func access(scopes []domain.Scope) string {
	for _, p := range domain.Presets {
		if slices.Equal(p.Scopes, scopes) {
			return p.ID
		}
	}
	return joinAny(scopes)
}
