package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"time"
)

// proc is a child process serving HTTP.
type proc struct {
	pid  int
	base string
	stop func() // interrupts it, and kills it if it is still up 10 s later
}

// startProc runs bin with args and --addr, a free address of the loopback,
// its output going to logPath, and waits until it answers /healthz.
func startProc(ctx context.Context, logPath, bin string, args ...string) (*proc, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	procCtx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(procCtx, bin, append(args, "--addr", addr)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	p := &proc{pid: cmd.Process.Pid, base: "http://" + addr, stop: func() { cancel(); _ = cmd.Wait() }}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(p.base + "/healthz"); err == nil {
			resp.Body.Close()
			return p, nil
		}
	}
	p.stop()
	b, _ := os.ReadFile(logPath)
	return nil, fmt.Errorf("%s did not start; its log: %s", bin, b)
}
