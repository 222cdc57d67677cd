package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's times:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// pidCPU is the user and system CPU time process pid has used so far, from
// /proc/<pid>/stat (0 when it cannot be read: it has exited).
func pidCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// cost is the CPU time each process spent on a part of a scenario.
type cost struct{ serve, pg, redis time.Duration }

func (c cost) total() time.Duration { return c.serve + c.pg + c.redis }

// reading is the CPU time a scenario's processes have used so far: serve,
// each PostgreSQL backend of its database, and Redis.
type reading struct {
	serve time.Duration
	pg    map[int]time.Duration
	redis time.Duration
}

// meter reads what one serve process costs: its own CPU and, behind it,
// that of the PostgreSQL backends serving its database (through admin, a
// connection to another database, so that the readings cost the backends
// measured nothing) and that of the whole Redis server (INFO cpu: anything
// else that uses it meanwhile counts too). PostgreSQL's shared processes
// (WAL writer, checkpointer) are not counted.
type meter struct {
	pid   int
	admin *pgx.Conn     // nil on SQLite
	db    string        // the database whose backends count
	redis *redis.Client // nil on SQLite
}

func (m meter) read(ctx context.Context) (reading, error) {
	r := reading{serve: pidCPU(m.pid)}
	if m.admin != nil {
		rows, err := m.admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1`, m.db)
		if err != nil {
			return r, err
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return r, err
		}
		r.pg = map[int]time.Duration{}
		for _, pid := range pids {
			r.pg[pid] = pidCPU(pid)
		}
	}
	if m.redis != nil {
		info, err := m.redis.Info(ctx, "cpu").Result()
		if err != nil {
			return r, err
		}
		r.redis = redisCPU(info)
	}
	return r, nil
}

// since is the cost between before and r. A backend that started
// meanwhile counts whole; one that exited takes its time with it (serve's
// pool keeps its connections, so under load none does).
func (r reading) since(before reading) cost {
	c := cost{serve: r.serve - before.serve, redis: r.redis - before.redis}
	for pid, d := range r.pg {
		if b, ok := before.pg[pid]; ok && b <= d {
			d -= b
		}
		c.pg += d
	}
	return c
}

// redisCPU sums used_cpu_sys and used_cpu_user (seconds) in an INFO cpu
// answer.
func redisCPU(info string) time.Duration {
	var secs float64
	for _, line := range strings.Split(info, "\n") {
		name, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			f, _ := strconv.ParseFloat(v, 64)
			secs += f
		}
	}
	return time.Duration(secs * float64(time.Second))
}
