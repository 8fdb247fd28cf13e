package filelock

import (
	"context"
	"errors"
	"strconv"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// waitInLine is a Mutex's Acquire once its first attempt found the lock
// held: it takes a ticket in the lock's line (line_linux.go) and tries again
// each time a release rings it. The waiter at the head of the line, known
// from its first place or from a ring, also wakes on the lock's release
// events, which is how it sees a holder die: a dead holder rings no one.
// The others poll only on the Queued backoff, which recovers a ring lost
// with a waiter that died after it was rung. Where a line cannot be joined
// (not Linux), the waiter races with the others (Provider.wait).
func (p *Provider) waitInLine(ctx context.Context, name, key string, try kit.Attempt) (core.Handle, error) {
	wk := key + "\x00" + strconv.FormatUint(p.waits.Add(1), 10)
	wake, stop := p.notifier.Subscribe(wk)
	defer stop()
	t, first, err := takeTicket(key, func() {
		// The attempt first: following the lock file costs a system
		// call, and is only for a holder that dies after this attempt.
		p.notifier.Notify(wk)
		p.lead(key, wk)
	})
	if err != nil {
		stop()
		p.watcher.followFile(key)
		defer p.watcher.unfollowFile(key)
		return p.wait(ctx, name, key, true, try)
	}
	if first {
		p.lead(key, wk)
	}
	h, err := kit.Wait(ctx, p.backoff.Queued(), wake, try)
	t.unlink()
	go func() {
		t.close() // no ring calls lead after this
		p.unlead(key, wk)
	}()
	if err != nil {
		// A ring meant for us may have come as we gave up: pass it on.
		wakeLine(key)
		return nil, waitError(name, err)
	}
	return h, nil
}

// lead makes the waiter wk a head of key's line in this Provider: it wakes
// on key's release events too, which it follows through the watcher.
func (p *Provider) lead(key, wk string) {
	p.mu.Lock()
	set := p.heads[key]
	if set == nil {
		set = make(map[string]struct{})
		p.heads[key] = set
	}
	_, was := set[wk]
	set[wk] = struct{}{}
	p.mu.Unlock()
	if !was {
		p.watcher.followFile(key)
	}
}

func (p *Provider) unlead(key, wk string) {
	p.mu.Lock()
	set := p.heads[key]
	_, was := set[wk]
	delete(set, wk)
	if was && len(set) == 0 {
		delete(p.heads, key)
	}
	p.mu.Unlock()
	if was {
		p.watcher.unfollowFile(key)
	}
}

// wake wakes the waiters of key in this Provider: those that race for it,
// and the heads of its line.
func (p *Provider) wake(key string) {
	p.notifier.Notify(key)
	p.mu.Lock()
	heads := make([]string, 0, len(p.heads[key]))
	for wk := range p.heads[key] {
		heads = append(heads, wk)
	}
	p.mu.Unlock()
	for _, wk := range heads {
		p.notifier.Notify(wk)
	}
}

// waitError names the lock in an error of kit.Wait that does not already.
func waitError(name string, err error) error {
	var ce *core.Error
	if !errors.As(err, &ce) {
		err = kit.Wrap(backend, "acquire", name, err)
	}
	return err
}
