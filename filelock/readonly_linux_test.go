package filelock

import (
	"testing"

	"golang.org/x/sys/unix"
)

// readOnlyForRoot returns a directory in which even root cannot create
// files: sysfs.
func readOnlyForRoot(t *testing.T) string {
	var st unix.Statfs_t
	if err := unix.Statfs("/sys", &st); err != nil || st.Type != unix.SYSFS_MAGIC {
		t.Fatalf("running as root needs sysfs at /sys for a read-only directory (statfs: %v)", err)
	}
	return "/sys"
}
