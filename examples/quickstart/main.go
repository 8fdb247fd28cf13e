// Command quickstart shows distlock with no server at all: the file backend
// keeps its locks in a directory, so processes on one host (here, two
// goroutines standing in for them) take turns.
//
//	go run ./examples/quickstart
//
// It shows each grant with its fencing token, then a protected work loop
// that stops by itself when its lock is lost.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/filelock"
)

func main() {
	dir := filepath.Join(os.TempDir(), "distlock-quickstart")
	locks, err := filelock.New(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
	ctx := context.Background()

	// 1. Two workers contend for one lock. Each grant carries a fencing
	// token larger than every earlier one: a storage system that remembers
	// the highest token it has seen can refuse a stale holder's write.
	lock := locks.Mutex("reports/daily")
	var wg sync.WaitGroup
	for _, worker := range []string{"worker-a", "worker-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				if err := work(ctx, lock, worker); err != nil {
					log.Fatal(err)
				}
				time.Sleep(10 * time.Millisecond) // give the other worker a turn
			}
		}()
	}
	wg.Wait()

	// 2. Protected work runs under the handle's context, which ends when the
	// lock is lost. Here an operator wipes the lock directory mid-run.
	h, err := lock.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Release(ctx)
	fmt.Printf("main holds %q with fencing token %d and starts a work loop\n", lock.Name(), h.FencingToken())
	go func() {
		time.Sleep(300 * time.Millisecond)
		fmt.Println("operator: rm -rf", dir)
		os.RemoveAll(dir)
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(10 * time.Second)
	for {
		select {
		case <-h.Context().Done():
			fmt.Println("work loop stopped:", context.Cause(h.Context()))
			return
		case <-tick.C:
			fmt.Println("  writing with fencing token", h.FencingToken())
		case <-giveUp:
			log.Fatal("the lost lock was not noticed within 10s")
		}
	}
}

// work is one critical section.
func work(ctx context.Context, lock core.Locker, worker string) error {
	h, err := lock.Acquire(ctx)
	if err != nil {
		return err
	}
	defer h.Release(ctx)
	fmt.Printf("%s holds %q with fencing token %d\n", worker, lock.Name(), h.FencingToken())
	time.Sleep(20 * time.Millisecond) // the protected work
	return nil
}
