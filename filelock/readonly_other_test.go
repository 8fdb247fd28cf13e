//go:build !linux

package filelock

import "testing"

func readOnlyForRoot(t *testing.T) string {
	t.Fatal("the read-only directory test cannot run as root on this platform")
	return ""
}
