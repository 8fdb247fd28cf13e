package main

import (
	"slices"
	"time"
)

// sources lists every backend's cases; each backend's file defines its own.
func sources() []source {
	return []source{fileCases, redisCases, redlockCases, pgCases, natsCases}
}

func sortDur(d []time.Duration) { slices.Sort(d) }
