package natslock

import (
	"context"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Scans. A scan reads the latest kvEntry of every key matching a filter
// through a short-lived pull consumer that delivers the last message per
// subject, fetched without waiting: the server answers with what it holds
// now and then says there is no more. A key that expires while the scan
// runs is simply not delivered. (A KV watcher would wait for it: it waits
// for as many messages as were pending when its consumer was made, and an
// expired message never comes.)

// scanBatch is how many entries one fetch of a scan asks for.
const scanBatch = 256

// scanInactive is how long the server keeps a scan's consumer when its
// delete did not arrive.
const scanInactive = 10 * time.Second

// kvEntry is one key's latest live value.
type kvEntry struct {
	key     string
	value   []byte
	created time.Time
}

// countLive counts the live (not deleted, not expired) keys matching
// filter; a key written meanwhile may count twice (see scan).
func (p *Provider) countLive(ctx context.Context, filter string) (int, error) {
	n := 0
	err := p.scan(ctx, p.kv, filter, true, func(kvEntry) { n++ })
	return n, err
}

// scan calls fn with the latest live kvEntry of every key of kv matching
// filter; with metaOnly the entries have no value. A key written while the
// scan runs may come twice (nats-server 2.9 can deliver such a write both
// as the key's last entry and as a new message), the newer entry last.
func (p *Provider) scan(ctx context.Context, kv jetstream.KeyValue, filter string, metaOnly bool, fn func(kvEntry)) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.timeout)
	defer cancel()
	if err := p.connected(ctx); err != nil {
		return err
	}
	stream, prefix := "KV_"+kv.Bucket(), "$KV."+kv.Bucket()+"."
	cons, err := p.js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		FilterSubject:     prefix + filter,
		DeliverPolicy:     jetstream.DeliverLastPerSubjectPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		HeadersOnly:       metaOnly,
		MemoryStorage:     true,
		InactiveThreshold: scanInactive,
	})
	if err != nil {
		return err
	}
	defer p.dropConsumer(stream, cons.CachedInfo().Name)
	for {
		batch, err := cons.FetchNoWait(scanBatch)
		if err != nil {
			return err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if e, ok := liveEntry(m, prefix); ok {
				fn(e)
			}
		}
		if err := batch.Error(); err != nil {
			return err
		}
		if n < scanBatch {
			return nil
		}
	}
}

// dropConsumer deletes a scan's consumer in the background, so that the
// scan's caller does not wait a round trip for it; once the Provider is
// closed it deletes it before returning. A delete that does not arrive
// leaves the consumer to the server's scanInactive.
func (p *Provider) dropConsumer(stream, name string) {
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.timeout)
		defer cancel()
		_ = p.js.DeleteConsumer(ctx, stream, name)
	}
	p.wmu.Lock()
	if p.closed {
		p.wmu.Unlock()
		drop()
		return
	}
	p.wg.Add(1)
	p.wmu.Unlock()
	go func() {
		defer p.wg.Done()
		drop()
	}()
}

// liveEntry reads m as a KV kvEntry; ok is false for a delete or purge
// marker.
func liveEntry(m jetstream.Msg, prefix string) (kvEntry, bool) {
	h := m.Headers()
	if h.Get("KV-Operation") != "" || h.Get(jetstream.MarkerReasonHeader) != "" {
		return kvEntry{}, false
	}
	e := kvEntry{key: strings.TrimPrefix(m.Subject(), prefix), value: m.Data()}
	if md, err := m.Metadata(); err == nil {
		e.created = md.Timestamp
	}
	return e, true
}
