package launch

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Etcd starts a single etcd member for t, its data in a temporary
// directory (so leases and revisions survive Kill), from the local etcd
// binary whichever engine runs the other servers: Debian's etcd-server,
// which `make test` installs. Addr is host:port of its client URL.
func Etcd(t testing.TB) Server {
	t.Helper()
	bin, ok := findBinary("etcd")
	if !ok {
		missing(t, "etcd")
	}
	dir := t.TempDir()
	peer := 0
	p := &proc{name: "etcd", bin: bin, ready: etcdHealthy, args: func(port int) []string {
		if peer == 0 || peer == port {
			peer = freePort(t)
		}
		client := "http://" + hostPort(port)
		peers := "http://" + hostPort(peer)
		return []string{"--name", "launch", "--data-dir", filepath.Join(dir, "data"), "--logger", "zap",
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peers, "--initial-advertise-peer-urls", peers,
			"--initial-cluster", "launch=" + peers}
	}}
	p.Start(t)
	t.Cleanup(func() { p.Kill(t) })
	return p
}

// etcdHealthy checks that the etcd member at addr reports itself healthy
// (it has a leader and answers reads).
func etcdHealthy(addr string) error {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/health")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd /health: %s", strconv.Quote(resp.Status))
	}
	return nil
}

// EtcdCluster starts a cluster of n etcd members for t, each with its data
// in a temporary directory, and returns once every member reports itself
// healthy (the cluster has a leader). A member killed and started again
// rejoins the cluster with its data; Start returns once it listens, before
// it has caught up.
func EtcdCluster(t testing.TB, n int) []Server {
	t.Helper()
	bin, ok := findBinary("etcd")
	if !ok {
		missing(t, "etcd")
	}
	ports, peers := make([]int, n), make([]string, n)
	for i := range n {
		ports[i] = freePort(t)
		peers[i] = fmt.Sprintf("m%d=http://%s", i, hostPort(freePort(t)))
	}
	cluster := strings.Join(peers, ",")
	ms := make([]Server, n)
	for i := range n {
		dir, name, peer := t.TempDir(), fmt.Sprintf("m%d", i), strings.SplitN(peers[i], "=", 2)[1]
		p := &proc{name: "etcd", bin: bin, port: ports[i], ready: listening, args: func(port int) []string {
			client := "http://" + hostPort(port)
			return []string{"--name", name, "--data-dir", filepath.Join(dir, "data"), "--logger", "zap",
				"--listen-client-urls", client, "--advertise-client-urls", client,
				"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
				"--initial-cluster", cluster}
		}}
		// A member listens before the cluster has a leader: start them
		// all, then wait for the leader.
		p.Start(t)
		t.Cleanup(func() { p.Kill(t) })
		ms[i] = p
	}
	for _, m := range ms {
		if err := waitUntil(startTimeout, func() error { return etcdHealthy(m.Addr()) }); err != nil {
			t.Fatalf("launch: etcd cluster member %s: %v", m.Addr(), err)
		}
	}
	return ms
}

// listening checks that something accepts connections at addr.
func listening(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}
