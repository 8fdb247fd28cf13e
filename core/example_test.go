package core_test

import (
	"context"
	"fmt"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/memlock"
)

func ExampleDo() {
	locks, _ := memlock.New() // or any backend's Provider
	defer locks.Close()
	var l core.Locker = locks.Mutex("reports")
	err := core.Do(context.Background(), l, func(ctx context.Context) error {
		// ctx is done if the lock is lost: stop writing when it is.
		fmt.Println("generating the report under the lock")
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// generating the report under the lock
	// err: <nil>
}
