package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of ClusterPrimaries primaries and no
// replicas, started by RedisCluster on loopback ports for one test.
type Cluster struct {
	t     testing.TB
	dir   string
	Addrs []string // host:port of each primary
	procs []*exec.Cmd
}

// ClusterPrimaries is how many primaries RedisCluster starts.
const ClusterPrimaries = 3

// clusterWait bounds each wait of RedisCluster: a node answering, the
// cluster reaching cluster_state:ok.
const clusterWait = 20 * time.Second

// RedisCluster starts a Redis Cluster of ClusterPrimaries primaries on
// free loopback ports (redis-server --cluster-enabled yes, no persistence,
// in a temporary directory; cluster-require-full-coverage no, as
// docs/production.md asks, so the others serve while one is away), joins them with redis-cli --cluster create,
// waits for cluster_state:ok on every node, and stops them when the test
// ends. Without redis-server and redis-cli in PATH the test fails in CI
// and is skipped elsewhere (Require).
func RedisCluster(t testing.TB) *Cluster {
	t.Helper()
	server, cli := clusterBinaries()
	for _, bin := range []string{server, cli} {
		if _, err := exec.LookPath(bin); err != nil {
			Require(t, "redis cluster", bin+" not in PATH (Debian: apt-get install redis-server)")
			return nil
		}
	}
	c := &Cluster{t: t, dir: t.TempDir()}
	t.Cleanup(c.stop)
	for range ClusterPrimaries {
		port, err := freeClusterPort()
		if err != nil {
			t.Fatal(err)
		}
		c.Addrs = append(c.Addrs, "127.0.0.1:"+strconv.Itoa(port))
		c.procs = append(c.procs, nil)
		c.start(len(c.Addrs) - 1)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s --cluster create: %v\n%s", cli, err, out)
	}
	c.WaitOK()
	return c
}

// URL is the cluster as --redis takes it: redis+cluster://host:port,….
func (c *Cluster) URL() string { return "redis+cluster://" + strings.Join(c.Addrs, ",") }

// Client returns a cluster client on c, closed when the test ends.
func (c *Cluster) Client() *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	c.t.Cleanup(func() { cc.Close() })
	return cc
}

// Kill ends primary i with SIGKILL, as a crash would, and waits for it.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	p := c.procs[i]
	if p == nil {
		return
	}
	_ = p.Process.Signal(syscall.SIGKILL)
	_ = p.Wait()
	c.procs[i] = nil
}

// Restart starts primary i again on its port, with the node configuration
// it wrote (its slots), and waits for the cluster to be ok again.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.start(i)
	c.WaitOK()
}

// EnvClusterServer names the server the test clusters run: "valkey" runs
// valkey-server and valkey-cli (Debian: apt-get install -t
// bookworm-backports valkey-server valkey-tools); unset or "redis",
// redis-server and redis-cli.
const EnvClusterServer = "AGENTAPI_TEST_CLUSTER_SERVER"

// clusterBinaries are the server and the cli EnvClusterServer names.
func clusterBinaries() (server, cli string) {
	if strings.TrimSpace(os.Getenv(EnvClusterServer)) == "valkey" {
		return "valkey-server", "valkey-cli"
	}
	return "redis-server", "redis-cli"
}

// start runs primary i's server and waits until it answers PING.
func (c *Cluster) start(i int) {
	c.t.Helper()
	port := c.Addrs[i][strings.LastIndexByte(c.Addrs[i], ':')+1:]
	server, _ := clusterBinaries()
	cmd := exec.Command(server, "--cluster-enabled", "yes", "--port", port, "--bind", "127.0.0.1",
		"--cluster-config-file", "nodes-"+port+".conf", "--dir", c.dir, "--save", "", "--appendonly", "no",
		"--cluster-node-timeout", "2000", "--cluster-require-full-coverage", "no")
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start redis-server on %s: %v", port, err)
	}
	c.procs[i] = cmd
	rc := redis.NewClient(&redis.Options{Addr: c.Addrs[i], MaxRetries: -1})
	defer rc.Close()
	c.poll(fmt.Sprintf("redis-server on %s answering", port), func(ctx context.Context) bool {
		return rc.Ping(ctx).Err() == nil
	})
}

// WaitOK waits until every running node says cluster_state:ok.
func (c *Cluster) WaitOK() {
	c.t.Helper()
	for i, addr := range c.Addrs {
		if c.procs[i] == nil {
			continue
		}
		rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		c.poll("cluster_state:ok on "+addr, func(ctx context.Context) bool {
			info, err := rc.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		})
		rc.Close()
	}
}

func (c *Cluster) poll(what string, ok func(context.Context) bool) {
	c.t.Helper()
	deadline := time.Now().Add(clusterWait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		done := ok(ctx)
		cancel()
		if done {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("not seen within %v: %s", clusterWait, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) stop() {
	for i := range c.procs {
		c.Kill(i)
	}
}

// freeClusterPort is a loopback port free now whose cluster bus port
// (port + 10000) is free too.
func freeClusterPort() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		bus.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free port pair for a cluster node")
}
