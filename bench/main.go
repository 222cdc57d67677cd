// Command bench measures agentapi against the floor: a bare net/http
// handler answering a JSON body of the size of GET /v1/me. Both run as
// separate processes and are driven in turn (A B A B) by one load
// generator with keep-alive connections; the table reports throughput,
// p50/p99 latency and the ratio to the floor measured in the same run.
// GET /v1/me is measured once more by two other serve processes on the
// same store, one recording usage and one not, in the same rounds (floor,
// on, off), so that recording's cost is a difference within one run.
//
//	go run ./bench                                   # SQLite, about 3 minutes
//	go run ./bench -postgres postgres://... -redis redis://...   # adds PostgreSQL + Redis
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"
)

type config struct {
	duration   time.Duration // per half of an A/B round
	rounds     int
	conns      int
	writers    int
	agents     int
	keys       int
	postgres   string
	redis      string
	floorAddr  string // internal: run as the floor server
	floorBytes int
	skipRSS    bool
	profileDir string   // when set, CPU and allocation profiles of serve per read scenario
	only       string   // when set, only the read scenarios whose name contains it
	back       *servers // set per engine: the local servers behind serve, measured
}

func main() {
	var c config
	flag.DurationVar(&c.duration, "duration", time.Second, "length of each measured half-round")
	flag.IntVar(&c.rounds, "rounds", 6, "A/B rounds per scenario (short and many, so that the machine's bursts of noise fall on both sides)")
	flag.IntVar(&c.conns, "conns", 16, "concurrent keep-alive connections for reads")
	flag.IntVar(&c.writers, "writers", 64, "concurrent writers for POST /v1/ai-agents")
	flag.IntVar(&c.agents, "agents", 200_000, "agents in the account walked page by page")
	flag.IntVar(&c.keys, "keys", 100_000, "keys made active for the RSS measure")
	flag.StringVar(&c.postgres, "postgres", os.Getenv("AGENTAPI_BENCH_POSTGRES_URL"), "PostgreSQL URL (a database named agentapi_bench_* is created and dropped); with -redis, adds the PostgreSQL + Redis run")
	flag.StringVar(&c.redis, "redis", os.Getenv("AGENTAPI_BENCH_REDIS_URL"), "Redis URL for the PostgreSQL run")
	flag.StringVar(&c.floorAddr, "floor", "", "internal: serve the floor on this address")
	flag.IntVar(&c.floorBytes, "floor-bytes", 0, "internal: the floor's body size")
	flag.BoolVar(&c.skipRSS, "skip-rss", false, "skip the 100k-active-keys RSS measure")
	flag.StringVar(&c.profileDir, "profile", "", "directory for serve's CPU and allocation profiles, taken through its admin listener during each read scenario's first service half")
	flag.StringVar(&c.only, "only", "", "run only the read scenarios whose name contains this (and skip the walk, writers and RSS)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	if c.floorAddr != "" {
		err = serveFloor(ctx, c.floorAddr, c.floorBytes)
	} else {
		err = run(ctx, c, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
