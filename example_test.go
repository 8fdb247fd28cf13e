package distlock_test

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
)

func ExampleOpen() {
	ctx := context.Background()
	locks, err := distlock.Open(ctx, "mem://example?identity=worker-1") // or redis://..., postgres://...
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close()
	h, err := locks.Mutex("reports/daily").Acquire(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Release(context.WithoutCancel(ctx))
	fmt.Println("token", h.FencingToken())

	_, err = distlock.Open(ctx, "redis://cache:6379/0?ttl=soon")
	fmt.Println(err)
	// Output:
	// token 1
	// distlock: invalid argument: URL redis://cache:6379/0?ttl=soon: parameter ttl: "soon" is not a duration (such as 30s or 1m30s)
}
