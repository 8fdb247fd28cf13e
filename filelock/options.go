package filelock

import (
	"log/slog"
	"strings"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Option configures a Provider.
type Option func(*options)

type options struct {
	backoff       kit.Backoff
	checkInterval time.Duration
	notify        bool
	identity      string
	log           *slog.Logger
	observers     []core.Observer
}

// Defaults, in one place.
func defaults() options {
	return options{
		// A waiter wakes on a release at once where the OS reports it
		// (inotify on Linux); the backoff bounds how long it takes to
		// notice a lock freed without a report: a holder that died, or a
		// platform without notification.
		backoff: kit.Backoff{Min: 2 * time.Millisecond, Max: 100 * time.Millisecond},
		// How often held lock files are checked for deletion or
		// replacement when no notification says so.
		checkInterval: time.Second,
		notify:        true,
		identity:      kit.DefaultIdentity(),
		log:           slog.New(slog.DiscardHandler),
	}
}

func (o options) validate() error {
	switch {
	case o.backoff.Min <= 0 || o.backoff.Max < o.backoff.Min:
		return kit.Invalid("filelock: backoff needs 0 < Min ≤ Max, got %v, %v", o.backoff.Min, o.backoff.Max)
	case o.checkInterval <= 0:
		return kit.Invalid("filelock: check interval must be positive, got %v", o.checkInterval)
	case o.identity == "":
		return kit.Invalid("filelock: empty identity")
	case strings.ContainsRune(o.identity, '\n'):
		return kit.Invalid("filelock: identity %q contains a newline", o.identity)
	case len(o.identity) > MaxIdentity:
		return kit.Invalid("filelock: identity is %d bytes, more than %d", len(o.identity), MaxIdentity)
	}
	return nil
}

// WithBackoff sets the fallback retry cadence of a waiting acquire. Waiters
// wake at once when a holder releases (on Linux, through inotify); the
// backoff only bounds how late a waiter notices a lock freed without such a
// signal, such as by a process that died holding it. Default 2 ms growing to
// 100 ms.
func WithBackoff(b kit.Backoff) Option {
	return func(o *options) { o.backoff = b }
}

// WithCheckInterval sets how often held lock files are checked for deletion
// or replacement (which makes the handle lost) in case the OS did not report
// it. Default 1 s. Each check costs one stat per held lock.
func WithCheckInterval(d time.Duration) Option {
	return func(o *options) { o.checkInterval = d }
}

// MaxIdentity is the longest identity, in bytes, that WithIdentity accepts.
const MaxIdentity = 1024

// WithIdentity sets the identity this Provider's holders record in their
// lock files, which core.Inspector (Holder) reports to everyone: a Mutex's
// holder, or an RWMutex's writer. Give each process its own, and give an
// election candidate the same ID as its election.Config. It must be
// non-empty, at most MaxIdentity bytes and without a newline. Default
// kit.DefaultIdentity() ("hostname-pid").
func WithIdentity(id string) Option {
	return func(o *options) { o.identity = id }
}

// WithLogger sets where the Provider reports what happens to its locks
// (OBSERVABILITY.md lists the lines): at Warn, a lock lost (its lock file
// found deleted or replaced, which ends its handle with ErrLockLost) or a
// release that failed; at Debug, each acquire and release. Default:
// discard, which costs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithObserver adds obs to the observers of the Provider's locks: each
// acquire (its outcome and wait), release, loss (with its cause) and check
// of a held lock file is reported to it (see core.Observer). Given more
// than once, every observer sees every event, in the order given. Default:
// none, which costs nothing.
func WithObserver(obs core.Observer) Option {
	return func(o *options) { o.observers = append(o.observers, obs) }
}

// withoutNotify turns off the directory watcher, so waiting falls back to
// polling as on platforms without inotify. For tests.
func withoutNotify() Option {
	return func(o *options) { o.notify = false }
}
