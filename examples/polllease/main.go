// Command polllease shows the poll-lease coordinator sharing targets among
// instances running as separate processes on one host: it starts a few
// instances, prints who polls what, kills one with SIGKILL, prints the
// takeover, then stops the rest gracefully.
//
//	go run ./examples/polllease -backend file
//	go run ./examples/polllease -backend redis -redis 127.0.0.1:6379
//
// Each instance is this program re-run with -child; it reports its lease
// events on stdout, which the parent gathers into the table it prints.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/filelock"
	"github.com/distlock/distlock/polllease"
	"github.com/distlock/distlock/redislock"
)

// Demo timings: a production deployment keeps polllease's defaults (5 s
// ticks, 15 s heartbeats) and gives its Provider polllease.RecommendedLeaseTTL
// (15 s leases), which fail over in about 21 s.
const (
	leaseTTL  = 3 * time.Second
	beatTTL   = 3 * time.Second
	beatEvery = time.Second
	tick      = time.Second
	minHold   = 2 * time.Second
	pollEvery = 2 * time.Second
)

type options struct {
	backend   string
	redisAddr string
	dir       string
	instances int
	targets   int
	group     string
	child     string
}

func main() {
	var o options
	flag.StringVar(&o.backend, "backend", "file", "store: file or redis")
	flag.StringVar(&o.redisAddr, "redis", "127.0.0.1:6379", "Redis address, for -backend redis")
	flag.StringVar(&o.dir, "dir", "", "lock directory, for -backend file (default: a new temporary directory)")
	flag.IntVar(&o.instances, "instances", 3, "instances to start")
	flag.IntVar(&o.targets, "targets", 12, "targets to share")
	flag.StringVar(&o.group, "group", "", "group name (default: a new one per run)")
	flag.StringVar(&o.child, "child", "", "run as the instance with this ID (used by the parent)")
	flag.Parse()
	log.SetFlags(0)

	if o.child != "" {
		if err := runInstance(o); err != nil {
			log.Fatalf("%s: %v", o.child, err)
		}
		return
	}
	if err := runDemo(o); err != nil {
		log.Fatal(err)
	}
}

func targetNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("endpoint-%02d", i)
	}
	return out
}

// store opens the backend's Provider, which also keeps the heartbeats.
func store(o options) (core.Provider, core.Membership, func(), error) {
	switch o.backend {
	case "file":
		p, err := filelock.New(o.dir)
		if err != nil {
			return nil, nil, nil, err
		}
		m, ok := any(p).(core.Membership)
		if !ok {
			p.Close()
			return nil, nil, nil, errors.New("this filelock build has no membership support")
		}
		return p, m, func() { p.Close() }, nil
	case "redis":
		rdb := redis.NewClient(&redis.Options{Addr: o.redisAddr, ContextTimeoutEnabled: true})
		p, err := redislock.New(rdb, redislock.WithTTL(leaseTTL))
		if err != nil {
			rdb.Close()
			return nil, nil, nil, err
		}
		return p, p, func() { p.Close(); rdb.Close() }, nil
	}
	return nil, nil, nil, fmt.Errorf("unknown backend %q: want file or redis", o.backend)
}

// runInstance is one instance: it polls its targets until SIGTERM, then
// stops gracefully. Its lease events go to stdout as "event KIND TARGET".
func runInstance(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	p, m, closeStore, err := store(o)
	if err != nil {
		return err
	}
	defer closeStore()
	var out sync.Mutex
	c, err := polllease.New(polllease.Config{
		Provider:          p,
		Membership:        m,
		Group:             o.group,
		InstanceID:        o.child,
		HeartbeatTTL:      beatTTL,
		HeartbeatInterval: beatEvery,
		ReconcileInterval: tick,
		MinHold:           minHold,
		Targets: func(context.Context) ([]string, error) {
			return targetNames(o.targets), nil
		},
		Poll: func(ctx context.Context, target string, token uint64) error {
			return nil // a real service would call the endpoint here, passing token along
		},
		PollInterval: func(string) time.Duration { return pollEvery },
		Logger:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnEvent: func(e polllease.Event) {
			out.Lock()
			defer out.Unlock()
			fmt.Printf("event %s %s %d\n", e.Kind, e.Target, e.Token)
		},
	})
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// fleet is the parent's view of the instances, built from their events.
type fleet struct {
	mu    sync.Mutex
	owner map[string]string // target → instance
	procs map[string]*exec.Cmd
	wg    sync.WaitGroup
}

func runDemo(o options) error {
	if o.group == "" {
		o.group = fmt.Sprintf("demo-%d", os.Getpid())
	}
	if o.backend == "file" && o.dir == "" {
		dir, err := os.MkdirTemp("", "polllease-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.dir = dir
	}
	if o.dir != "" {
		abs, err := filepath.Abs(o.dir)
		if err != nil {
			return err
		}
		o.dir = abs
	}
	// Check the store once before starting anything.
	_, _, closeStore, err := store(o)
	if err != nil {
		return err
	}
	closeStore()

	self, err := os.Executable()
	if err != nil {
		return err
	}
	f := &fleet{owner: map[string]string{}, procs: map[string]*exec.Cmd{}}
	defer f.stopAll()
	for i := range o.instances {
		id := fmt.Sprintf("instance-%d", i+1)
		if err := f.start(self, id, o); err != nil {
			return err
		}
	}
	fmt.Printf("started %d instances over the %s backend, sharing %d targets (group %q)\n",
		o.instances, o.backend, o.targets, o.group)

	f.waitCovered(o.targets, 30*time.Second)
	f.print("distribution")

	victim := "instance-1"
	fmt.Printf("\nkilling %s with SIGKILL (no graceful release)...\n", victim)
	f.kill(victim)
	start := time.Now()
	covered := f.waitCovered(o.targets, 30*time.Second)
	fmt.Printf("its targets were polled again %v later (at most the lease and heartbeat TTL, %v, plus a tick of %v)\n",
		covered.Sub(start).Round(100*time.Millisecond), max(leaseTTL, beatTTL), tick)
	f.print("after the takeover")
	fmt.Println("\nstopping the others gracefully (SIGTERM: release every lease, deregister)")
	return nil
}

func (f *fleet) start(self, id string, o options) error {
	args := []string{"-child", id, "-backend", o.backend, "-redis", o.redisAddr, "-dir", o.dir,
		"-targets", fmt.Sprint(o.targets), "-group", o.group}
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	f.mu.Lock()
	f.procs[id] = cmd
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.read(id, out)
	}()
	return nil
}

// read applies an instance's events to the ownership table.
func (f *fleet) read(id string, r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 4 || fields[0] != "event" {
			continue
		}
		kind, target := fields[1], fields[2]
		f.mu.Lock()
		switch kind {
		case "acquired", "resumed":
			f.owner[target] = id
		case "released", "lost", "uncertain":
			if f.owner[target] == id {
				delete(f.owner, target)
			}
		}
		f.mu.Unlock()
	}
}

func (f *fleet) kill(id string) {
	f.mu.Lock()
	cmd := f.procs[id]
	delete(f.procs, id)
	for t, o := range f.owner {
		if o == id {
			delete(f.owner, t) // a dead process polls nothing
		}
	}
	f.mu.Unlock()
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

func (f *fleet) stopAll() {
	f.mu.Lock()
	procs := f.procs
	f.procs = map[string]*exec.Cmd{}
	f.mu.Unlock()
	for _, cmd := range procs {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, cmd := range procs {
		_ = cmd.Wait()
	}
	f.wg.Wait()
}

// waitCovered waits until every target has an owner and nothing has moved
// for two ticks, and returns when every target last became covered.
func (f *fleet) waitCovered(targets int, within time.Duration) time.Time {
	deadline := time.Now().Add(within)
	var last string
	var coveredAt time.Time
	stableSince := time.Now()
	for time.Now().Before(deadline) {
		f.mu.Lock()
		n := len(f.owner)
		snap := fmt.Sprint(f.owner)
		f.mu.Unlock()
		if snap != last {
			last, stableSince = snap, time.Now()
		}
		switch {
		case n != targets:
			coveredAt = time.Time{}
		case coveredAt.IsZero():
			coveredAt = time.Now()
		}
		if n == targets && time.Since(stableSince) >= 2*tick {
			return coveredAt
		}
		time.Sleep(100 * time.Millisecond) // the demo's display cadence
	}
	fmt.Println("(not every target is covered yet)")
	return time.Now()
}

func (f *fleet) print(title string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	by := map[string][]string{}
	for t, id := range f.owner {
		by[id] = append(by[id], t)
	}
	ids := make([]string, 0, len(by))
	for id := range by {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	fmt.Printf("\n%s:\n", title)
	for _, id := range ids {
		slices.Sort(by[id])
		fmt.Printf("  %-11s polls %2d: %s\n", id, len(by[id]), strings.Join(by[id], " "))
	}
}
