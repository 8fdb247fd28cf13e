//go:build !linux

package filelock

// watcher is not available on this platform: waiters poll on the Provider's
// backoff, and held files are checked on the check interval.
type watcher struct{}

func newWatcher(func(string, bool), func()) *watcher { return nil }

func (*watcher) watching(string) bool { return true }

func (*watcher) add(string) error { return nil }

func (*watcher) close() {}

type followWatch struct{}

func (*watcher) followFile(string) *followWatch { return nil }

func (*watcher) watches(*followWatch) bool { return false }

func (*watcher) unfollowFile(*followWatch) {}
