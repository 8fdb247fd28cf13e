package main

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// sources lists every backend's cases; each backend's file defines its own.
func sources() []source {
	return []source{fileCases, redisCases, redlockCases, pgCases, natsCases, mysqlCases, etcdCases}
}

func sortDur(d []time.Duration) { slices.Sort(d) }

// pollEvery1ms is the Acquire of the raw floors: try, and on a busy lock
// sleep a millisecond and try again, as hand-written code usually does.
func pollEvery1ms(ctx context.Context, try func(context.Context) (core.Handle, error)) (core.Handle, error) {
	for {
		h, err := try(ctx)
		if !errors.Is(err, core.ErrNotAcquired) {
			return h, err
		}
		select {
		case <-ctx.Done():
			return nil, kit.NotAcquired(ctx)
		case <-time.After(time.Millisecond):
		}
	}
}
