package filelock

import (
	"strings"

	"github.com/distlock/distlock/core/kit"
)

// stemPrefixMax is the longest readable prefix a file stem keeps, so that
// the longest file name, a semaphore slot "<stem>.1023.lock", fits in 64
// characters.
const stemPrefixMax = 27

// fileStem returns the file name stem for a lock, group or member name: the
// portable encoding of kit.SafeName (a readable prefix, '-', a Base32
// SHA-256 hash of the exact name) with the prefix cut to stemPrefixMax
// characters. The hash alone tells names apart, so cutting the prefix loses
// nothing. A stem has no '.', so a file's stem is its name up to the first
// dot, and it can be neither "." nor "..".
func fileStem(name string) string {
	s := kit.SafeName(name)
	i := strings.LastIndexByte(s, '-')
	if i > stemPrefixMax {
		s = s[:stemPrefixMax] + s[i:]
	}
	return s
}
