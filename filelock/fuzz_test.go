package filelock

import (
	"strings"
	"testing"

	"github.com/distlock/distlock/core/kit"
)

// FuzzFileStemsDistinct checks that two distinct names never share a lock
// file, even on a case-insensitive file system: their stems differ in more
// than case. (FuzzFileNames checks that every file stays in its directory.)
func FuzzFileStemsDistinct(f *testing.F) {
	for _, s := range [][2]string{
		{"a", "A"}, {"a/b", "a_b"}, {"../x", "__/x"}, {strings.Repeat("x", 40), strings.Repeat("x", 41)},
		{"é", "e"}, {"a\x00", "a"}, {"lock", "lock "},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if a == b || kit.ValidateName(a) != nil || kit.ValidateName(b) != nil {
			return
		}
		sa, sb := fileStem(a), fileStem(b)
		if strings.EqualFold(sa, sb) {
			t.Fatalf("%q and %q share the lock file stem %q", a, b, sa)
		}
		if fileStem(a) != sa {
			t.Fatalf("fileStem(%q) is not deterministic", a)
		}
	})
}
