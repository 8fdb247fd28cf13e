//go:build !linux

package delayproxy

import "time"

// clock is one writer's timer; off Linux it is the runtime's.
type clock struct{}

func newClock() *clock { return &clock{} }

func (*clock) sleep(d time.Duration) { time.Sleep(d) }

func (*clock) close() {}
