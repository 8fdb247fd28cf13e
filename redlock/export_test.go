package redlock

import (
	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/redislock"
)

// GrantOf exposes a handle's grant to the tests, which break it by hand.
func GrantOf(h core.Handle) redislock.Grant { return h.(*handle).grant }
