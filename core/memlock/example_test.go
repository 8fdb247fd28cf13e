package memlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/memlock"
)

// A test checks that code holding a lock stops its work when the lock is
// lost.
func ExampleProvider_Break() {
	locks, _ := memlock.New()
	defer locks.Close()

	h, _ := locks.Mutex("reports").Acquire(context.Background())
	locks.Break("reports") // as if an operator deleted the lock
	<-h.Context().Done()
	fmt.Println(errors.Is(context.Cause(h.Context()), core.ErrLockLost))
	// Output: true
}
