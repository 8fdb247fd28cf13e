package etcdlock

import "sync"

// Bounds of the key names kept for reuse, per lock and role, and in all;
// when the whole is full it starts over.
const (
	maxSparePerLock = 64
	maxSpare        = 4096
)

// spareNames keeps the names of this Provider's deleted keys for its next
// contenders of the same lock and role. etcd's index keeps every name a
// key range has held until the next compaction, and a read or compare over
// a lock's keys walks them all: reusing names keeps that walk near the
// peak number of this Provider's contenders, where fresh names would grow
// it with every grant. A name is put back only once its key is known
// deleted and no delete of it is pending (a lost handle's key is an orphan,
// whose sweep could delete the name's next key: handle.release), and only
// this Provider writes it (its id is in the name), so a reused name
// always starts a new key with a new create revision.
type spareNames struct {
	mu sync.Mutex
	m  map[string][]string
	n  int
}

func (s *spareNames) get(scope string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := s.m[scope]
	if len(names) == 0 {
		return "", false
	}
	name := names[len(names)-1]
	if len(names) == 1 {
		delete(s.m, scope)
	} else {
		s.m[scope] = names[:len(names)-1]
	}
	s.n--
	return name, true
}

func (s *spareNames) put(scope, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || s.n >= maxSpare {
		s.m, s.n = make(map[string][]string), 0
	}
	if len(s.m[scope]) < maxSparePerLock {
		s.m[scope] = append(s.m[scope], name)
		s.n++
	}
}
