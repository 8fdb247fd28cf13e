package pglock

import (
	"context"

	"github.com/distlock/distlock/core/kit"
)

// verifySQL reports whether the session with backend pid $1 holds the
// advisory lock with tag ($2, $3, $4) in mode $5.
const verifySQL = `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
  AND pid = $1::int4 AND classid = $2::int8::oid AND objid = $3::int8::oid AND objsubid = $4::int2
  AND mode = $5::text)`

// verify asks the server, on the pool (g's own connection may be busy
// waiting for another lock), whether g's session still holds g's lock:
// the kit.SessionDriver's Verify, behind every handle's core.Verifier. It
// needs no fence table, so it answers in every mode.
func (p *Provider) verify(ctx context.Context, g *grant) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	c, o, sub := g.Key.lockTag()
	var held bool
	err := p.pool.QueryRow(ctx, verifySQL, int32(g.Session.Conn.pc.PgConn().PID()), c, o, sub, g.Info.mode.pgMode()).Scan(&held)
	if err != nil {
		return false, kit.Wrap(backend, "verify", g.Name, err)
	}
	return held, nil
}
