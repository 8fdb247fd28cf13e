package filelock

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/distlock/distlock/core/kit"
)

var portable = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$`)

// FuzzFileNames checks that whatever a lock, group or member is called,
// every file filelock may create for it stays in its directory under a
// portable name of at most 64 characters.
func FuzzFileNames(f *testing.F) {
	for _, s := range []string{
		"a", "..", ".", "../../etc/passwd", "/abs", `C:\x`, "nul\x00", "😀",
		strings.Repeat("x", 1000), "a.lock", "CON", " ", "\n",
	} {
		f.Add(s)
	}
	p, err := New("/nonexistent/distlock-fuzz")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = p.Close() })
	f.Fuzz(func(t *testing.T, name string) {
		if kit.ValidateName(name) != nil {
			return
		}
		check := func(parent, path string) {
			t.Helper()
			rel, err := filepath.Rel(parent, path)
			if err != nil || rel != filepath.Base(path) {
				t.Fatalf("%q: %s is not directly in %s", name, path, parent)
			}
			if !portable.MatchString(rel) || rel == "." || rel == ".." {
				t.Fatalf("%q: %q is not a portable file name", name, rel)
			}
		}
		for _, kind := range []string{mutexDir, rwmutexDir, semaphoreDir} {
			base := p.base(kind, name)
			parent := filepath.Join(p.Dir(), kind)
			for _, ext := range []string{".lock", ".gate", ".ctr", ".prio"} {
				check(parent, base+ext)
			}
			check(parent, base+"."+strconv.Itoa(MaxSemaphore-1)+".lock")
		}
		group := filepath.Join(p.Dir(), membershipDir, fileStem(name))
		check(filepath.Dir(group), group+".lock")
		check(group, memberPath(group, name))
	})
}
