package kit_test

import (
	"testing"
	"time"
)

// waitFor waits for ch to be closed, failing t after a deadline that only
// a broken test reaches.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
	}
}
