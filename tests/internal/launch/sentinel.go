package launch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name under which the Sentinels of RedisSentinel
// monitor their master.
const SentinelMaster = "distlock"

// Sentinel timing: a master that does not answer for sentinelDownAfter is
// down; a failover (and the repair of a replica that follows the wrong
// master) waits sentinelFailoverTimeout. A failover takes about 2 s.
const (
	sentinelDownAfter       = time.Second
	sentinelFailoverTimeout = 3 * time.Second
)

// RedisSentinel is a Redis deployment watched by Sentinel: a master, one
// replica of it, and three Sentinels (quorum 2) that promote the replica
// when the master dies. Clients reach it with redis.NewFailoverClient
// (MasterName SentinelMaster, SentinelAddrs Sentinels). No server persists
// its data: a server killed and started again comes back empty, and the
// Sentinels make it a replica of the current master.
type RedisSentinel struct {
	// Servers are the master as started and its replica. Which one is the
	// master changes with each failover: ask Master.
	Servers [2]Server
	// Sentinels are the Sentinels' addresses.
	Sentinels []string
}

// Sentinel starts a RedisSentinel for t and returns once every Sentinel
// knows the replica and the other Sentinels, so that a failover can happen.
// Everything runs from the local redis-server (the Sentinels as
// `redis-server <config> --sentinel`, their generated configuration and
// state in a temporary directory), whichever engine runs the other
// servers: Sentinels announce the addresses they see, which a container's
// port mapping would hide. Without redis-server the test is skipped, or
// fails under CI=true or DISTLOCK_REQUIRE_SERVERS=1. Cleanup stops every
// process.
func Sentinel(t testing.TB) *RedisSentinel {
	t.Helper()
	if _, ok := findBinary("redis-server"); !ok {
		missing(t, "redis-server")
	}
	master := newLocalRedis(t, RedisConfig{}, nil)
	_, port := splitAddr(master.Addr())
	replica := newLocalRedis(t, RedisConfig{}, []string{"--replicaof", "127.0.0.1", port})
	s := &RedisSentinel{Servers: [2]Server{master, replica}}
	for i := range 3 {
		s.Sentinels = append(s.Sentinels, startSentinel(t, master.Addr(), i).Addr())
	}
	if err := waitUntil(startTimeout, s.formed); err != nil {
		t.Fatalf("launch: the Sentinels did not see the replica and each other: %v", err)
	}
	return s
}

// startSentinel starts Sentinel number i, monitoring master.
func startSentinel(t testing.TB, master string, i int) *proc {
	t.Helper()
	bin, _ := findBinary("redis-server")
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel-"+strconv.Itoa(i)+".conf")
	host, port := splitAddr(master)
	p := &proc{name: "redis-sentinel", bin: bin, ready: redisPing, args: func(p int) []string {
		// Sentinel rewrites its configuration file as it learns: each start
		// gets a fresh one.
		cfg := strings.Join([]string{
			fmt.Sprintf("port %d", p),
			"bind 127.0.0.1",
			"dir " + dir,
			"loglevel warning",
			"sentinel resolve-hostnames no",
			fmt.Sprintf("sentinel monitor %s %s %s 2", SentinelMaster, host, port),
			fmt.Sprintf("sentinel down-after-milliseconds %s %d", SentinelMaster, sentinelDownAfter.Milliseconds()),
			fmt.Sprintf("sentinel failover-timeout %s %d", SentinelMaster, sentinelFailoverTimeout.Milliseconds()),
			fmt.Sprintf("sentinel parallel-syncs %s 1", SentinelMaster),
		}, "\n") + "\n"
		if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
			return []string{"--bad-config-" + err.Error()} // redis-server refuses it: Start reports it
		}
		return []string{conf, "--sentinel"}
	}}
	p.Start(t)
	t.Cleanup(func() { p.Kill(t) })
	return p
}

// formed checks that every Sentinel knows one replica, whose link to the
// master is up, and the two other Sentinels.
func (s *RedisSentinel) formed() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, addr := range s.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
		m, err := sc.Master(ctx, SentinelMaster).Result()
		if err == nil && (m["num-slaves"] != "1" || m["num-other-sentinels"] != "2") {
			err = fmt.Errorf("sentinel %s: %s replicas, %s other sentinels", addr, m["num-slaves"], m["num-other-sentinels"])
		}
		if err == nil {
			var rs []map[string]string
			rs, err = sc.Replicas(ctx, SentinelMaster).Result()
			if err == nil && (len(rs) != 1 || rs[0]["master-link-status"] != "ok") {
				err = fmt.Errorf("sentinel %s: replicas %v", addr, rs)
			}
		}
		_ = sc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// Rejoin starts srv, a killed server that is not the master, again and
// makes it a replica of the master at once (the Sentinels would, some
// 10 s later), and returns once its link to the master is up: a failover
// can then promote it. It comes back empty and gets the master's data set.
// It fails t when that takes longer than within.
func (s *RedisSentinel) Rejoin(t testing.TB, srv Server, within time.Duration) {
	t.Helper()
	m := s.Master(t, within)
	if m == srv {
		t.Fatalf("launch: %s is the master", srv.Addr())
	}
	srv.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer c.Close()
	host, port := splitAddr(m.Addr())
	err := waitUntil(within, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		info, err := c.Info(ctx, "replication").Result()
		switch {
		case err != nil:
			return err
		case !strings.Contains(info, "master_port:"+port+"\r\n"):
			if err := c.ReplicaOf(ctx, host, port).Err(); err != nil {
				return err
			}
			return fmt.Errorf("%s: made a replica of %s", srv.Addr(), m.Addr())
		case !strings.Contains(info, "master_link_status:up"):
			return fmt.Errorf("%s: link to the master %s is down", srv.Addr(), m.Addr())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("launch: %s did not rejoin as a replica: %v", srv.Addr(), err)
	}
}

// Master returns the server the Sentinels name as master, once they agree
// on one that answers as a master, or fails t after within.
func (s *RedisSentinel) Master(t testing.TB, within time.Duration) Server {
	t.Helper()
	var m Server
	err := waitUntil(within, func() error {
		var err error
		m, err = s.master()
		return err
	})
	if err != nil {
		t.Fatalf("launch: no master: %v", err)
	}
	return m
}

// WaitFailover waits until the Sentinels have promoted a server other than
// old and it answers as a master, and returns it; it fails t after within.
func (s *RedisSentinel) WaitFailover(t testing.TB, old Server, within time.Duration) Server {
	t.Helper()
	var m Server
	err := waitUntil(within, func() error {
		var err error
		if m, err = s.master(); err == nil && m == old {
			err = fmt.Errorf("the Sentinels still name %s", old.Addr())
		}
		return err
	})
	if err != nil {
		t.Fatalf("launch: no failover from %s: %v", old.Addr(), err)
	}
	return m
}

// master is the server every Sentinel names as master, if it answers as
// one.
func (s *RedisSentinel) master() (Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var addr string
	for _, sa := range s.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: sa})
		hp, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
		_ = sc.Close()
		switch {
		case err != nil:
			return nil, fmt.Errorf("sentinel %s: %w", sa, err)
		case len(hp) != 2:
			return nil, fmt.Errorf("sentinel %s: master %v", sa, hp)
		case addr != "" && hostPort(atoi(hp[1])) != addr:
			return nil, fmt.Errorf("the Sentinels disagree: %s and %s:%s", addr, hp[0], hp[1])
		}
		addr = hostPort(atoi(hp[1]))
	}
	for _, srv := range s.Servers {
		if srv.Addr() != addr {
			continue
		}
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		role, err := c.Do(ctx, "ROLE").Slice()
		_ = c.Close()
		if err != nil {
			return nil, err
		}
		if len(role) == 0 || role[0] != "master" {
			return nil, fmt.Errorf("%s is named master but answers ROLE %v", addr, role)
		}
		return srv, nil
	}
	return nil, fmt.Errorf("the Sentinels name %s, not one of the servers", addr)
}

func splitAddr(addr string) (host, port string) {
	i := strings.LastIndexByte(addr, ':')
	return addr[:i], addr[i+1:]
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
