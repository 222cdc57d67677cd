package main

import (
	"fmt"
	"io"
	"strings"
)

type table struct{ rows [][]string }

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) print(w io.Writer) {
	head := []string{"store", "measure", "throughput", "p50", "p99", "ratio / figure"}
	fmt.Fprintln(w, "| "+strings.Join(head, " | ")+" |")
	fmt.Fprintln(w, "|"+strings.Repeat("---|", len(head)))
	for _, r := range t.rows {
		fmt.Fprintln(w, "| "+strings.Join(r, " | ")+" |")
	}
}
