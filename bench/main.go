// Command bench measures agentapi's CPU per request, by process: serve's,
// PostgreSQL's (the backends of the bench's database) and Redis's, beside
// the floor's: a bare net/http handler answering a body of GET /v1/me's
// size, measured in the same run. The load generator's own CPU is not
// counted: on a small machine it competes with the service, which moves
// throughput far more than it moves CPU per request.
//
// Each engine runs two stores side by side, each behind its own serve: a
// small one (1,000 keys, an account of 1,000 agents, one of 1,000 request
// logs) and one at scale (1,000,000 keys, an account of 1,000,000 agents,
// one at the 100,000-log cap). Every scenario is measured in rounds,
// interleaved (the floor, then each scenario, each round starting at the
// next), so that the machine's drift and bursts fall on all of them alike;
// each scale case is reported against its small case, with the spread of
// that ratio over the rounds.
//
//	go run ./bench                                              # SQLite
//	go run ./bench -postgres postgres://... -redis redis://...  # and PostgreSQL + Redis
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/agentapi/agentapi/internal/store"
)

type config struct {
	duration   time.Duration // per scenario per round
	rounds     int
	conns      int
	small, big sizes
	postgres   string
	redis      string
	floorAddr  string // internal: run as the floor, on this address
	floorBytes int
}

func main() {
	c := config{small: sizes{keys: 1_000, agents: 1_000, logs: 1_000}}
	flag.DurationVar(&c.duration, "duration", 2*time.Second, "length of each scenario's measured part of a round")
	flag.IntVar(&c.rounds, "rounds", 5, "interleaved rounds")
	flag.IntVar(&c.conns, "conns", 16, "concurrent keep-alive connections")
	flag.IntVar(&c.big.keys, "keys", 1_000_000, "keys in the store at scale")
	flag.IntVar(&c.big.agents, "agents", 1_000_000, "agents in the listed account at scale")
	flag.IntVar(&c.big.logs, "logs", store.LogsPerAccount, "request logs in the logged account at scale")
	flag.StringVar(&c.postgres, "postgres", os.Getenv("AGENTAPI_BENCH_POSTGRES_URL"), "PostgreSQL URL (databases named agentapi_bench_* are created and dropped); with -redis, adds the PostgreSQL + Redis run")
	flag.StringVar(&c.redis, "redis", os.Getenv("AGENTAPI_BENCH_REDIS_URL"), "Redis URL for the PostgreSQL run (its database and the next are used); its whole CPU is counted, so give it one that nothing else uses")
	flag.StringVar(&c.floorAddr, "addr", "", "internal: serve the floor on this address")
	flag.IntVar(&c.floorBytes, "floor-bytes", 0, "internal: the floor's body size")
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
