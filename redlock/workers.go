package redlock

import (
	"sync"
	"time"
)

// workers runs the per-server calls of every operation. A call through the
// Redis driver grows its goroutine's stack several times; a fresh goroutine
// per call would pay for that growth on every call, about a tenth of the
// client's CPU per operation. Workers outlive their call and take the next
// one, so their grown stacks are reused. A worker idle for workerIdle
// exits, so a burst of concurrency leaves no crowd behind.
type workers struct {
	jobs chan func() // unbuffered: a send succeeds only when a worker is idle
	wg   *sync.WaitGroup
	done <-chan struct{}
}

// workerIdle is how long a worker waits for its next call before exiting.
const workerIdle = 10 * time.Second

func newWorkers(wg *sync.WaitGroup, done <-chan struct{}) *workers {
	return &workers{jobs: make(chan func()), wg: wg, done: done}
}

// run runs f on an idle worker, or on a new one.
func (w *workers) run(f func()) {
	select {
	case w.jobs <- f:
	default:
		w.wg.Add(1)
		go w.loop(f)
	}
}

func (w *workers) loop(f func()) {
	defer w.wg.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-w.jobs:
		case <-idle.C:
			return
		case <-w.done:
			return
		}
	}
}
