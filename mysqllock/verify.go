package mysqllock

import (
	"context"

	"github.com/distlock/distlock/core/kit"
)

// verify asks the server, on the pool (g's own connection may be busy
// waiting for another lock), whether g's session still holds g's lock:
// IS_USED_LOCK names the connection that holds a lock. It is the
// kit.SessionDriver's Verify, behind every handle's core.Verifier, and
// needs no fence table.
func (p *Provider) verify(ctx context.Context, g *grant) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	var held bool
	err := p.db.QueryRowContext(ctx, `SELECT COALESCE(IS_USED_LOCK(?) = ?, FALSE)`, g.Key, g.Session.Conn.id).Scan(&held)
	if err != nil {
		return false, kit.Wrap(backend, "verify", g.Name, err)
	}
	return held, nil
}
