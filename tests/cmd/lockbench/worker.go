package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/distlock/distlock/core"
)

// The contended loop of both modes: each worker holds the lock this long
// and thinks this long between tries.
const (
	holdFor  = time.Millisecond
	thinkFor = 2 * time.Millisecond
)

// workerArgs are the flags of a worker process of the multi-process mode:
// lockbench re-executes itself with them, once per worker.
type workerArgs struct {
	on   bool
	src  int
	name string
	lock string
}

func (w *workerArgs) flags() {
	flag.BoolVar(&w.on, "worker", false, "internal: run as one worker process of -procs")
	flag.IntVar(&w.src, "worker-source", 0, "internal: the worker's source, an index in sources()")
	flag.StringVar(&w.name, "worker-case", "", "internal: the worker's case")
	flag.StringVar(&w.lock, "worker-lock", "", "internal: the lock the workers contend for")
}

// workerReport is what a worker writes on its stdout when its run ends.
// Times are wall-clock Unix nanoseconds, comparable between the processes
// of one machine.
type workerReport struct {
	Holds [][2]int64 // [Acquire returned, Release called], one per grant
	Waits []int64    // each granting Acquire's duration, ns
	Cut   []int64    // the duration of an Acquire cut drainFor after the window, ns
	Err   string     `json:",omitempty"`
}

// window is the measured run: workers start trying at Start and start no
// Acquire at or after End. Acquires under way at End finish, so every
// wait is whole; the parent counts only what falls inside the window.
type window struct{ Start, End int64 }

// runWorker is a worker process: it opens its case's source alone, makes
// one Locker on it (one Provider or client for this process), writes
// "ready", reads the window as JSON on stdin, runs the contended loop and
// writes its workerReport. Its stdout carries nothing else.
func runWorker(w workerArgs) int {
	srcs := sources()
	if w.src < 0 || w.src >= len(srcs) {
		fmt.Fprintf(os.Stderr, "lockbench worker: source %d out of range\n", w.src)
		return 2
	}
	cases, cleanup, err := srcs[w.src]()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockbench worker:", err)
		return 1
	}
	defer cleanup()
	var c *benchCase
	for i := range cases {
		if cases[i].Name == w.name {
			c = &cases[i]
		}
	}
	if c == nil {
		fmt.Fprintf(os.Stderr, "lockbench worker: no case %q in source %d\n", w.name, w.src)
		return 2
	}
	rep := workerReport{}
	in := json.NewDecoder(bufio.NewReader(os.Stdin))
	out := json.NewEncoder(os.Stdout)
	l := c.New(w.lock)
	if err := warmUp(c.New(fmt.Sprintf("%s/warm/%d", w.lock, os.Getpid()))); err != nil {
		rep.Err = "warm-up: " + err.Error()
		_ = out.Encode(rep)
		return 0
	}
	fmt.Println("ready")
	var win window
	if err := in.Decode(&win); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench worker: reading the window:", err)
		return 1
	}
	rep = contend(l, win)
	if err := out.Encode(rep); err != nil {
		return 1
	}
	return 0
}

// warmUp makes one grant on a lock of its own, so the worker's
// connections are open before the window starts.
func warmUp(l core.Locker) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := l.TryAcquire(ctx)
	if err != nil {
		return err
	}
	return h.Release(ctx)
}

// drainFor bounds the Acquires still waiting when the window ends: they
// may finish within it (their waits are whole), and are cut after it
// (their waits count as cut, a lower bound), so that a lock that starves
// its waiters cannot stall the run.
const drainFor = 2 * time.Second

// contend loops Acquire, hold, Release, think from win.Start until
// win.End, and reports every grant and wait.
func contend(l core.Locker, win window) workerReport {
	var rep workerReport
	time.Sleep(time.Until(time.Unix(0, win.Start)))
	end := time.Unix(0, win.End)
	actx, cancel := context.WithDeadline(context.Background(), end.Add(drainFor))
	defer cancel()
	for time.Now().Before(end) {
		t0 := time.Now()
		h, err := l.Acquire(actx)
		t1 := time.Now()
		if err != nil {
			if actx.Err() != nil && errors.Is(err, core.ErrNotAcquired) {
				rep.Cut = append(rep.Cut, int64(t1.Sub(t0)))
				return rep
			}
			rep.Err = fmt.Sprintf("acquire: %v", err)
			return rep
		}
		rep.Waits = append(rep.Waits, int64(t1.Sub(t0)))
		spin(holdFor)
		t2 := time.Now()
		rep.Holds = append(rep.Holds, [2]int64{t1.UnixNano(), t2.UnixNano()})
		rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
		err = h.Release(rctx)
		rcancel()
		if err != nil {
			rep.Err = fmt.Sprintf("release: %v", err)
			return rep
		}
		time.Sleep(thinkFor)
	}
	return rep
}

// spin holds the lock for d without the timer's slack a sleep would add,
// as core/locktest's contended measure does.
func spin(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
	}
}
