package mysqllock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// The fence sequence's durability. NEXTVAL serves a block of CACHE values
// from memory and writes the sequence's row when it starts a block; after a
// crash the sequence goes on from the row, above every block it recorded.
// But the row's write is not committed with the statement that draws: its
// redo record waits for the next commit (or the once-a-second log flush),
// so a crash soon after a block starts would hand that block's values out
// again. A Provider therefore confirms each block before it returns a token
// from it: one commit of a row of the mark table on the drawing
// connection, whose redo follows the block's record and is written with it
// (and flushed, with innodb_flush_log_at_trx_commit = 1). One round trip
// per block of 1000 tokens a Provider draws from.

// markSuffix names the mark table after the sequence.
const markSuffix = "_mark"

// seqCache is the block size of the sequences the Provider creates.
const seqCache = 1000

// seqBlocks is what a Provider knows of its fence sequence.
type seqBlocks struct {
	mu           sync.Mutex
	start, cache uint64 // the sequence's START and CACHE
	// durable: tokens below it are in blocks confirmed durable. Written
	// under mu, read without it by the check each grant makes.
	durable atomic.Uint64
}

// ensureFence creates the fence sequence (and its mark table) or table once
// per Provider, and reads the sequence's parameters. A concurrent creator
// elsewhere is harmless: IF NOT EXISTS. An existing sequence is only read:
// a CREATE on it would queue for an exclusive metadata lock behind every
// statement waiting with the sequence open, and hold up every draw behind
// it.
func (p *Provider) ensureFence(ctx context.Context) error {
	return p.fenceSetup.Run(ctx, p.opts.Timeout, func(ctx context.Context) error {
		if !p.sql.seq {
			return p.ensureFenceTable(ctx)
		}
		if err := p.readSequence(ctx); err == nil {
			return nil
		}
		for _, q := range []string{
			fmt.Sprintf(`CREATE SEQUENCE IF NOT EXISTS %s INCREMENT BY 1 CACHE %d`, p.sql.fence, seqCache),
			fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (id TINYINT UNSIGNED PRIMARY KEY, n BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB`, p.sql.mark),
			fmt.Sprintf(`INSERT IGNORE INTO %s (id, n) VALUES (1, 0)`, p.sql.mark),
		} {
			if _, err := p.db.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("create fence sequence %s (sequences are MariaDB's, 10.3 and later; on MySQL use WithFenceTable): %w", p.opts.FenceTable, err)
			}
		}
		return p.readSequence(ctx)
	})
}

// ensureFenceTable creates the fence table where information_schema does
// not show it (tableColumn), so that a user with only SELECT, INSERT and
// UPDATE on it needs no CREATE privilege.
func (p *Provider) ensureFenceTable(ctx context.Context) error {
	exists, _, err := p.tableColumn(ctx, p.opts.FenceTable, "token")
	if err != nil {
		return fmt.Errorf("read fence table %s: %w", p.opts.FenceTable, err)
	}
	if exists {
		return nil
	}
	q := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (name VARBINARY(64) PRIMARY KEY,
token BIGINT UNSIGNED NOT NULL, holder VARBINARY(1024), conn BIGINT UNSIGNED) ENGINE=InnoDB`, p.sql.fence)
	if _, err := p.db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("create fence table %s: %w", p.opts.FenceTable, err)
	}
	return nil
}

// readSequence reads the fence sequence's parameters, and checks that its
// mark table has its row.
func (p *Provider) readSequence(ctx context.Context) error {
	var incr int64
	var start, cache uint64
	q := fmt.Sprintf(`SELECT start_value, increment, cache_size FROM %s`, p.sql.fence)
	if err := p.db.QueryRowContext(ctx, q).Scan(&start, &incr, &cache); err != nil {
		return fmt.Errorf("read fence sequence %s: %w", p.opts.FenceTable, err)
	}
	if incr != 1 || cache == 0 {
		return fmt.Errorf("fence sequence %s has INCREMENT %d CACHE %d: it needs INCREMENT 1 and a CACHE", p.opts.FenceTable, incr, cache)
	}
	var one int
	if err := p.db.QueryRowContext(ctx, fmt.Sprintf(`SELECT 1 FROM %s WHERE id = 1`, p.sql.mark)).Scan(&one); err != nil {
		return fmt.Errorf("read fence sequence %s's mark table: %w", p.opts.FenceTable, err)
	}
	p.seq.mu.Lock()
	p.seq.start, p.seq.cache = start, cache
	p.seq.mu.Unlock()
	return nil
}

// confirm makes token's block of the fence sequence durable before the
// token is returned, unless the Provider confirmed that block already: a
// commit on c (locked), which drew the token. With the fence table each
// grant commits its own row, and there is nothing to do.
func (c *session) confirm(ctx context.Context, token uint64) error {
	p := c.p
	if !p.sql.seq {
		return nil
	}
	if token < p.seq.durable.Load() {
		return nil
	}
	p.seq.mu.Lock()
	start, cache := p.seq.start, p.seq.cache
	p.seq.mu.Unlock()
	if _, err := c.exec(ctx, fmt.Sprintf(`UPDATE %s SET n = n + 1 WHERE id = 1`, p.sql.mark)); err != nil {
		return fmt.Errorf("confirm the fence sequence's block: %w", err)
	}
	end := start + ((token-start)/cache+1)*cache
	p.seq.mu.Lock()
	if end > p.seq.durable.Load() {
		p.seq.durable.Store(end)
	}
	p.seq.mu.Unlock()
	return nil
}
