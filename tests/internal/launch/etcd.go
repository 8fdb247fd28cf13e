package launch

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
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
