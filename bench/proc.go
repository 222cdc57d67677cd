package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// proc is a child process serving HTTP.
type proc struct {
	cmd  *exec.Cmd
	base string
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

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
	cmd := exec.Command(bin, append(args, "--addr", addr)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, base: "http://" + addr}
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

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
	}
}

// startFloor runs the floor (this program, -floor) answering as many bytes
// as serve's me.
func startFloor(ctx context.Context, tmp string, me target) (*proc, error) {
	body, err := get(ctx, http.DefaultClient, me)
	if err != nil {
		return nil, err
	}
	return startProc(ctx, filepath.Join(tmp, "floor.log"), os.Args[0], "-floor-bytes", fmt.Sprint(len(body)))
}
