package redisop

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/distlock/distlock/core/kit"
)

// Kind is the kind of grant a Lock names.
type Kind uint8

// The kinds of grant. A mutex, a reader-writer lock and a semaphore with the
// same name live under distinct keys: they are distinct locks. Their tokens
// all derive from the server's clock, so they increase across kinds too.
const (
	KindMutex     Kind = iota + 1 // exclusive lock in a plain key
	KindWrite                     // write side of a reader-writer lock
	KindRead                      // read side of a reader-writer lock
	KindSemaphore                 // one of Max slots
)

func (k Kind) String() string {
	switch k {
	case KindMutex:
		return "mutex"
	case KindWrite:
		return "write"
	case KindRead:
		return "read"
	case KindSemaphore:
		return "semaphore"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Lock names one lock on a server.
type Lock struct {
	Kind Kind
	Name string
	Max  int // semaphore size; ignored by the other kinds

	safe string    // kit.SafeName(Name), when computed ahead
	keys *lockKeys // its keys under one prefix, when computed ahead
}

// Validate checks l before any I/O: an error matching core.ErrInvalidName
// for a bad name, core.ErrInvalidArgument for a semaphore size below 1 or
// an unknown kind.
func (l Lock) Validate() error {
	if err := kit.ValidateName(l.Name); err != nil {
		return err
	}
	switch l.Kind {
	case KindMutex, KindWrite, KindRead:
		return nil
	case KindSemaphore:
		if l.Max < 1 {
			return kit.Invalid("semaphore max %d < 1", l.Max)
		}
		return nil
	}
	return kit.Invalid("unknown lock kind %v", l.Kind)
}

// Grant is one held grant: the lock and the owner value that holds it.
type Grant struct {
	Lock  Lock
	Owner string
}

// Result is the outcome of one acquire attempt.
type Result struct {
	// Acquired reports whether the grant was made.
	Acquired bool
	// Token is the grant's fencing token when Acquired.
	Token uint64
	// RetryIn, when not Acquired, is the longest it is worth waiting before
	// trying again: the holder's remaining TTL, or the time until the first
	// semaphore slot or reader expires. Zero when unknown.
	RetryIn time.Duration
	// Counter, when not Acquired, for a mutex through Client.AcquireCounted,
	// is the name's durable counter when the server answered: a grant made
	// to the same owner after this answer (a release's handover) has a
	// larger token, and a grant announced with a token at most Counter was
	// made before it, and is gone.
	Counter uint64
	// Young, for Client.AcquireCounted with a guard, is how long this
	// server's grants must not count yet: its data set was first seen less
	// than the guard ago (it is new, or it restarted and lost its data).
	// A mutex's busy answers carry it too: a young server's Counter may
	// have been lost with its data, and be behind tokens it handed out.
	// Zero otherwise.
	Young time.Duration
}

// NewOwner returns a fresh 128-bit random owner value. Every acquire call
// uses its own, which is what makes locks non-reentrant and a stale handle's
// release harmless.
func NewOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b[:])
}
