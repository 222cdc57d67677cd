package main

import (
	"fmt"
	"io"
	"strings"
)

type table struct {
	head []string
	rows [][]string
}

// results and cpuCosts are the heads of the two tables the bench prints.
var (
	results  = []string{"store", "measure", "throughput", "p50", "p99", "ratio / figure"}
	cpuCosts = []string{"store", "measure", "service CPU/req", "floor CPU/req", "load generator CPU/req (service)", "(floor)", "servers behind the service, CPU/req (when local)"}
)

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) print(w io.Writer) {
	fmt.Fprintln(w, "| "+strings.Join(t.head, " | ")+" |")
	fmt.Fprintln(w, "|"+strings.Repeat("---|", len(t.head)))
	for _, r := range t.rows {
		fmt.Fprintln(w, "| "+strings.Join(r, " | ")+" |")
	}
}
