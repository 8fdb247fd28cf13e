package redlock

import (
	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/redislock/redisop"
)

// GrantOf exposes a handle's grant to the tests, which break it by hand.
func GrantOf(h core.Handle) redisop.Grant { return h.(*handle).grant }
