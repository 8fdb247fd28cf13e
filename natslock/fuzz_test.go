package natslock

import (
	"regexp"
	"strings"
	"testing"

	"github.com/distlock/distlock/core/kit"
)

// kvKey is what a JetStream KV key may be (nats.go jetstream keyValid):
// these characters, not starting or ending with a dot. A watch key may
// also hold the wildcards * and >.
var (
	kvKey    = regexp.MustCompile(`^[-/_=.a-zA-Z0-9]+$`)
	kvSearch = regexp.MustCompile(`^[-/_=.a-zA-Z0-9*]*(>)?$`)
)

func validKey(key string, re *regexp.Regexp) bool {
	return key != "" && key[0] != '.' && key[len(key)-1] != '.' && re.MatchString(key)
}

// keysOf returns every KV key the locks called name may write, and the
// keys their waiters watch.
func keysOf(name string) (keys, watch []string) {
	rw := (&Provider{}).RWMutex(name).(*rwMutex)
	sem := semaphoreKeys(name)
	keys = []string{mutexKey(name), rw.wKey, rw.rPrefix + "." + newOwner(), slotKey(sem, 0), slotKey(sem, 1<<20)}
	return keys, []string{mutexKey(name), rw.watchKey, sem + ".*"}
}

// FuzzKeys checks that whatever a lock is called, every key natslock
// writes or watches for it is a valid KV key, and that distinct names, and
// distinct kinds of one name, never share a key.
func FuzzKeys(f *testing.F) {
	for _, s := range [][2]string{
		{"a", "A"}, {"a.b", "a_b"}, {"..", "."}, {"*", ">"}, {"rw.x", "x"}, {"m.x", "x"},
		{strings.Repeat("é", 100), strings.Repeat("é", 101)}, {"a b", "a\tb"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if kit.ValidateName(a) != nil || kit.ValidateName(b) != nil {
			return
		}
		ka, wa := keysOf(a)
		for _, k := range ka {
			if !validKey(k, kvKey) {
				t.Fatalf("name %q: %q is not a valid KV key", a, k)
			}
		}
		for _, k := range wa {
			if !validKey(k, kvSearch) {
				t.Fatalf("name %q: %q is not a valid KV watch key", a, k)
			}
		}
		seen := map[string]bool{}
		for _, k := range ka {
			if seen[k] {
				t.Fatalf("name %q: two kinds share the key %q", a, k)
			}
			seen[k] = true
		}
		if a == b {
			return
		}
		kb, _ := keysOf(b)
		for i := range kb {
			if i == 2 {
				continue // reader keys are random per grant
			}
			if seen[kb[i]] {
				t.Fatalf("names %q and %q share the key %q", a, b, kb[i])
			}
		}
	})
}
