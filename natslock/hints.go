package natslock

import "sync"

// maxHints bounds the hint cache; when full it starts over, which costs at
// most one extra round trip per key.
const maxHints = 4096

// hints remembers, per key, the revision of the latest delete marker this
// Provider wrote or its watchers saw. An acquire writes expecting that
// revision, which succeeds in one round trip when the key is still free; a
// wrong guess only costs the read that a guess of 0 would have needed. A
// hint is only ever a marker's revision, never a live holder's, so a write
// expecting it can never overwrite a held lock.
type hints struct {
	mu sync.Mutex
	m  map[string]uint64
}

func (h *hints) get(key string) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[key]
}

// set records rev for key unless a later marker is known already.
func (h *hints) set(key string, rev uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= maxHints {
		h.m = make(map[string]uint64)
	}
	if rev > h.m[key] {
		h.m[key] = rev
	}
}

// drop forgets key's hint if it is still rev: the key moved on.
func (h *hints) drop(key string, rev uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m[key] == rev {
		delete(h.m, key)
	}
}

// maxSpareKeys bounds the reader keys kept for reuse, per lock and in all.
const maxSpareKeys = 64

// spareKeys keeps the keys of released read grants for the next read grant
// of the same lock in this Provider. Reusing them keeps the number of reader
// keys (and the delete markers a writer's listing must skip) near the peak
// number of concurrent readers instead of growing with every read of the
// last TTL; a reused key is taken in one round trip, expecting its marker.
type spareKeys struct {
	mu sync.Mutex
	m  map[string][]string
	n  int
}

func (s *spareKeys) get(prefix string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := s.m[prefix]
	if len(keys) == 0 {
		return "", false
	}
	k := keys[len(keys)-1]
	if len(keys) == 1 {
		delete(s.m, prefix)
	} else {
		s.m[prefix] = keys[:len(keys)-1]
	}
	s.n--
	return k, true
}

func (s *spareKeys) put(prefix, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || s.n >= maxHints {
		s.m, s.n = make(map[string][]string), 0
	}
	if len(s.m[prefix]) < maxSpareKeys {
		s.m[prefix] = append(s.m[prefix], key)
		s.n++
	}
}
