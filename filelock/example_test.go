package filelock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/filelock"
)

func Example() {
	dir, err := os.MkdirTemp("", "example-locks")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	p, err := filelock.New(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	ctx := context.Background()
	for range 2 {
		h, err := p.Mutex("nightly-report").Acquire(ctx)
		if err != nil {
			log.Fatal(err)
		}
		// Do the work under h.Context(), and pass the token to whatever
		// you write to, so it can refuse a holder that lost the lock.
		fmt.Println("holding the lock with fencing token", h.FencingToken())
		if err := h.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// holding the lock with fencing token 1
	// holding the lock with fencing token 2
}

func ExampleProvider_Mutex_tryAcquire() {
	dir, err := os.MkdirTemp("", "example-locks")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	p, err := filelock.New(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	ctx := context.Background()
	h, err := p.Mutex("job").TryAcquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Release(ctx)

	// Locks are not reentrant: a second attempt fails, even here.
	_, err = p.Mutex("job").TryAcquire(ctx)
	fmt.Println(errors.Is(err, core.ErrNotAcquired))
	// Output:
	// true
}

func ExampleProvider_RWMutex() {
	dir, err := os.MkdirTemp("", "example-locks")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	p, err := filelock.New(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	ctx := context.Background()
	rw := p.RWMutex("config")
	r1, _ := rw.RLocker().TryAcquire(ctx)
	r2, _ := rw.RLocker().TryAcquire(ctx)
	fmt.Println("two readers:", r1 != nil && r2 != nil)

	_, err = rw.TryAcquire(ctx)
	fmt.Println("writer while reading:", errors.Is(err, core.ErrNotAcquired))

	r1.Release(ctx)
	r2.Release(ctx)
	w, err := rw.TryAcquire(ctx)
	fmt.Println("writer alone:", err == nil)
	w.Release(ctx)
	// Output:
	// two readers: true
	// writer while reading: true
	// writer alone: true
}

func ExampleProvider_Semaphore() {
	dir, err := os.MkdirTemp("", "example-locks")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	p, err := filelock.New(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	ctx := context.Background()
	sem := p.Semaphore("encoders", 2)
	var held []core.Handle
	for range 3 {
		h, err := sem.TryAcquire(ctx)
		if err != nil {
			fmt.Println("full:", errors.Is(err, core.ErrNotAcquired))
			continue
		}
		held = append(held, h)
	}
	fmt.Println("holders:", len(held))
	for _, h := range held {
		h.Release(ctx)
	}
	// Output:
	// full: true
	// holders: 2
}

func ExampleNew_invalidName() {
	p, err := filelock.New(os.TempDir())
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	_, err = p.Mutex("").Acquire(context.Background())
	fmt.Println(errors.Is(err, core.ErrInvalidName))
	fmt.Println(err)
	// Output:
	// true
	// distlock/file: acquire "": distlock: invalid lock name
}

func ExampleProvider_Members() {
	dir, err := os.MkdirTemp("", "example-locks")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	p, err := filelock.New(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	ctx := context.Background()
	for _, id := range []string{"worker-2", "worker-1"} {
		if err := p.Register(ctx, "pollers", id, 30*time.Second); err != nil {
			log.Fatal(err)
		}
	}
	live, err := p.Members(ctx, "pollers")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(live)
	// Output:
	// [worker-1 worker-2]
}

// A Mutex tells anyone who holds it: the holder's identity and token.
func ExampleWithIdentity() {
	dir, err := os.MkdirTemp("", "example-locks")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// Two processes in real life, each with its own identity.
	worker, err := filelock.New(dir, filelock.WithIdentity("worker-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer worker.Close()
	observer, err := filelock.New(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer observer.Close()

	ctx := context.Background()
	h, err := worker.Mutex("nightly-report").Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	insp := observer.Mutex("nightly-report").(core.Inspector)
	who, held, err := insp.Holder(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held:", held, "by", who.ID, "with token", who.Token)

	if err := h.Release(ctx); err != nil {
		log.Fatal(err)
	}
	_, held, err = insp.Holder(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held:", held)
	// Output:
	// held: true by worker-1 with token 1
	// held: false
}
