//go:build !linux

package delayproxy

import "time"

func sleep(d time.Duration) { time.Sleep(d) }
