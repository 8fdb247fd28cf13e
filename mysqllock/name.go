package mysqllock

import (
	"strconv"
	"strings"

	"github.com/distlock/distlock/core/kit"
)

// maxLockName is the longest user-lock name MySQL accepts (MariaDB accepts
// longer ones; every name here fits both).
const maxLockName = 64

// hashLen is the length of the hash that ends every kit.SafeName.
const hashLen = 26

// lockName maps a distlock name to the server's name of one of its locks:
// kind (a short tag, see the callers) then kit.SafeName(name), its readable
// prefix shortened so that the whole fits in maxLockName. The hash part
// (130 bits of SHA-256 of the exact name) is kept whole, so distinct names
// give distinct server names as far as the hash allows, whatever their
// length, case or bytes; kind ends with '/', which SafeName never writes,
// so the kinds never meet either. The same name always gives the same
// server name, in every process.
func lockName(kind, name string) string {
	s := kit.SafeName(name)
	readable, hash := s[:len(s)-hashLen-1], s[len(s)-hashLen:]
	if keep := maxLockName - len(kind) - 1 - hashLen; len(readable) > keep {
		readable = readable[:keep]
	}
	var b strings.Builder
	b.Grow(len(kind) + len(readable) + 1 + hashLen)
	b.WriteString(kind)
	b.WriteString(readable)
	b.WriteByte('-')
	b.WriteString(hash)
	return b.String()
}

// Kinds of server lock names.
const (
	kindMutex = "dl/m/" // a Mutex: its GET_LOCK name and its counter row
	kindSem   = "dl/s/" // a semaphore's counter row
)

// slotKind is the kind of slot i of a semaphore.
func slotKind(i int) string { return "dl/s" + strconv.Itoa(i) + "/" }

// LockName returns the server's name of the user-level lock of
// Mutex(name), for clients outside distlock: IS_USED_LOCK(LockName(name))
// reports the connection id of the session that holds it, and a GET_LOCK
// on it excludes the same holders (without a fencing token).
func LockName(name string) string { return lockName(kindMutex, name) }

// SlotName returns the server's name of the user-level lock of slot i
// (0 ≤ i < max) of Semaphore(name, max), as LockName does for a Mutex.
func SlotName(name string, i int) string { return lockName(slotKind(i), name) }
