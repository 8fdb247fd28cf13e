package filelock

import (
	"context"
	"strconv"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// waitInLine is a Mutex's Acquire once its first attempt found the lock
// held: it takes a ticket in the lock's line (line_linux.go) and tries again
// each time a release rings it. A waiter at the front of the line, known
// from its place when it joined or from a ring, also wakes on the lock's
// release events, which it follows through the watcher: that is how it
// sees a holder die, since a dead holder rings no one. The others poll only
// on the Queued backoff, which recovers a ring lost with waiters that died
// at the front. Where a line cannot be joined (not Linux), the waiter races
// with the others (Provider.wait).
func (p *Provider) waitInLine(ctx context.Context, name, key string, attempt func(t *ticket) kit.Attempt) (core.Handle, error) {
	wk := key + "\x00" + strconv.FormatUint(p.waits.Add(1), 10)
	wake, stop := p.notifier.Subscribe(wk)
	defer stop()
	t, atFront, err := takeTicket(key, func(try bool) {
		p.lead(key, wk)
		if try {
			p.notifier.Notify(wk)
		}
	})
	if err != nil {
		// Race with the others, woken by the lock file's events: the
		// mutex directory's watch does not report releases.
		stop()
		fw := p.watcher.followFile(key)
		defer p.watcher.unfollowFile(fw)
		return p.wait(ctx, name, key, true, attempt(nil))
	}
	if atFront {
		p.lead(key, wk)
	}
	h, err := kit.Wait(ctx, p.backoff.Queued(), wake, attempt(t))
	t.unlink()
	if err != nil {
		t.close()
		p.unlead(key, wk)
		// A ring meant for us may have come as we gave up: pass it on.
		wakeLine(key)
		return nil, kit.Wrap(backend, "acquire", name, err)
	}
	go func() {
		t.close() // no ring calls lead after this
		p.unlead(key, wk)
	}()
	return h, nil
}

// lead makes the waiter wk one at the front of key's line: it wakes on
// key's release events too, which this Provider follows for it. The watch
// is in place when lead returns; one that ended (the file was replaced) is
// renewed.
func (p *Provider) lead(key, wk string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	set := p.heads[key]
	if set == nil {
		set = make(map[string]*followWatch)
		p.heads[key] = set
	}
	fw, was := set[wk]
	if was && p.watcher.watches(fw) {
		return
	}
	p.watcher.unfollowFile(fw)
	set[wk] = p.watcher.followFile(key)
}

// unlead undoes lead; no lead of wk runs after it starts.
func (p *Provider) unlead(key, wk string) {
	p.mu.Lock()
	set := p.heads[key]
	fw, was := set[wk]
	delete(set, wk)
	if was && len(set) == 0 {
		delete(p.heads, key)
	}
	p.mu.Unlock()
	p.watcher.unfollowFile(fw)
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
