package filelock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Holder records
//
// An exclusive holder (a Mutex's, or an RWMutex's writer) writes a record,
// "<identity>\n<token>\n", into its lock file through its signal descriptor
// once granted, before Acquire returns, and truncates the file before it
// unlocks it, so a record in a file that nobody holds is always that of a
// holder that died (or whose truncate failed). A new holder truncates such a
// stale record as the first step of its grant, a few system calls after its
// flock and before it takes its token, and writes its own into the empty
// file with one write. Readers of an RWMutex and semaphore slot holders
// write nothing.
//
// Holder opens the file read-only, without creating it or following a
// symbolic link, reads it, and when the record is not empty probes with a
// non-blocking shared lock, which fails while an exclusive holder holds the
// file. A record cut short (a read that caught the holder's write half
// done) is read again, once. Holder never waits; its descriptor is
// read-only, so its close is IN_CLOSE_NOWRITE, which wakes no waiter, and it
// never notifies this Provider's waiters.
//
// What a reader can see, against a concurrent acquire or release:
//   - Every answer was true at some instant during the call, with one
//     exception below. An empty file is reported free (the record is read
//     first); a non-empty record is reported held when, at the later probe,
//     the file is exclusively locked. Either an acquire whose record is not
//     written yet (it has not returned) or a release that has truncated
//     (and is returning) is reported free, as if the call came just before
//     the acquire or just after the release. A record read just before its
//     holder releases and a successor locks is reported as held: it was
//     true at the read.
//   - The exception: after a holder dies without releasing, its record
//     stays until the next holder clears it, a few system calls after that
//     holder's flock; a call in that window reports the dead holder as
//     held. A call that finds a stale record and no holder reports the lock
//     free.
//   - The probe takes the shared lock only when nobody holds the file
//     exclusively, which with a non-empty record means after a holder died
//     (or, for an RWMutex, while readers hold it, which it does not
//     disturb). For the two system calls it holds it, an exclusive attempt
//     racing it fails as if the lock were held and retries on its waiter's
//     next wake or backoff. On a free lock with an empty file, and on a
//     held one, Holder takes no lock at all, so it never steals a grant.
//   - A holder whose record could not be written (its lock file is not
//     writable, or the write failed) is reported free: the record is best
//     effort and never fails a grant.

var (
	_ core.Inspector = (*mutex)(nil)
	_ core.Inspector = (*rwmutex)(nil)
)

// Holder reports who holds the mutex: the identity the holder's Provider
// was given (WithIdentity, default kit.DefaultIdentity) and the holder's
// fencing token; held is false when the mutex is free. It never waits and
// takes no lock that could delay an acquire of a held or free lock: it
// opens the lock file read-only, reads the holder record and, only when
// there is one, checks with a non-blocking probe that the lock is held:
// five system calls on Unix (open, fcntl, read, flock, close), four on a
// free lock. It wakes no waiter.
//
// Right after a holder dies, until the next holder is a few system calls
// into its grant, Holder can still name the dead holder; a holder whose
// lock file is not writable is reported free. Errors are *core.Error values
// with Op "holder"; a closed Provider fails with an error matching
// core.ErrInvalidArgument.
func (m *mutex) Holder(ctx context.Context) (core.Holder, bool, error) {
	return m.p.holder(ctx, m.name, m.base+".lock")
}

// Holder reports the writer that holds the lock, as Mutex's Holder does;
// held is false when no writer holds it, including while readers do:
// readers are not reported.
func (l *rwmutex) Holder(ctx context.Context) (core.Holder, bool, error) {
	return l.p.holder(ctx, l.name, l.base+".lock")
}

func (p *Provider) holder(ctx context.Context, name, path string) (core.Holder, bool, error) {
	if ctx == nil {
		return core.Holder{}, false, kit.Wrap(backend, "holder", name, kit.Invalid("nil context"))
	}
	if err := ctx.Err(); err != nil {
		return core.Holder{}, false, kit.Wrap(backend, "holder", name, err)
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return core.Holder{}, false, kit.Wrap(backend, "holder", name, fmt.Errorf("%w: %w", core.ErrInvalidArgument, errClosed))
	}
	h, held, err := readHolder(path)
	if err != nil {
		return core.Holder{}, false, kit.Wrap(backend, "holder", name, classify(err))
	}
	return h, held, nil
}

// maxRecord is the size of the longest holder record: an identity, a
// 20-digit token and two newlines.
const maxRecord = MaxIdentity + 22

// readHolder reads the holder record of the lock file at path and checks
// that the file is locked exclusively.
func readHolder(path string) (core.Holder, bool, error) {
	f, err := openReadOnly(path)
	if errors.Is(err, fs.ErrNotExist) {
		return core.Holder{}, false, nil // never locked, or the directory is gone
	}
	if err != nil {
		return core.Holder{}, false, err
	}
	defer f.Close() // also drops the probe's lock when it got one

	buf := make([]byte, maxRecord+1)
	n, err := f.Read(buf) // a fresh descriptor reads from offset 0
	if err != nil && err != io.EOF {
		return core.Holder{}, false, err
	}
	if n == 0 {
		return core.Holder{}, false, nil
	}
	switch err := lockNB(f, true); {
	case err == nil:
		return core.Holder{}, false, nil // a dead holder's record
	case !errors.Is(err, errLocked):
		return core.Holder{}, false, fmt.Errorf("probe %s: %w", path, err)
	}
	if h, ok := parseRecord(buf[:n]); ok {
		return h, true, nil
	}
	// The read raced the holder's write of its record into the empty file
	// and saw part of it. Read again, once.
	n, err = f.ReadAt(buf, 0)
	if err != nil && err != io.EOF {
		return core.Holder{}, false, err
	}
	if n == 0 {
		return core.Holder{}, false, nil // released since
	}
	h, ok := parseRecord(buf[:n])
	if !ok {
		return core.Holder{}, false, fmt.Errorf("unreadable holder record in %s: %q", path, buf[:n])
	}
	return h, true, nil
}

// parseRecord decodes "<identity>\n<token>\n".
func parseRecord(rec []byte) (core.Holder, bool) {
	id, rest, ok := bytes.Cut(rec, []byte{'\n'})
	if !ok || len(id) == 0 {
		return core.Holder{}, false
	}
	tok, rest, ok := bytes.Cut(rest, []byte{'\n'})
	if !ok || len(rest) != 0 {
		return core.Holder{}, false
	}
	token, err := strconv.ParseUint(string(tok), 10, 64)
	if err != nil || token == 0 {
		return core.Holder{}, false
	}
	return core.Holder{ID: string(id), Token: token}, true
}
