package core_test

import (
	"context"
	"fmt"

	"github.com/distlock/distlock/core"
)

func ExampleDo() {
	var l core.Locker = &memLocker{name: "reports"} // any backend's Locker
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
