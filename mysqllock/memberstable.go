package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/distlock/distlock/core"
	"github.com/go-sql-driver/mysql"
)

// The members table and its statements. A table made by an earlier
// version has no value column; the setup adds it, and where the user may
// not (no ALTER privilege) the Provider goes on without values: Register
// (and so core.Heartbeat) leaves the column out, Members and Deregister
// never read it, and Announce fails with core.ErrUnsupported (noValues).
// A Provider opened after someone adds the column uses it.

// ensureMembers makes the members table ready and prepares the membership
// statements, once per Provider. Without the value column it logs one
// warning that names the statement that adds it.
func (p *Provider) ensureMembers(ctx context.Context) error {
	return p.membersSetup.Run(ctx, p.opts.Timeout, func(ctx context.Context) error {
		values, err := p.membersTable(ctx)
		if err != nil {
			return fmt.Errorf("members table %s: %w", p.opts.MembersTable, err)
		}
		if err := p.memberStmts.prepare(ctx, p.db, p.sql.members, values); err != nil {
			return err
		}
		if !values {
			p.log.Warn("mysqllock: the members table has no value column and this user may not add it: membership works without values and Announce fails with core.ErrUnsupported until the statement is run and a new Provider opened",
				"table", p.opts.MembersTable, "statement", addValueSQL(p.sql.members))
		}
		return nil
	})
}

// membersTable creates the members table when information_schema does not
// show it, or adds the value column to one made by an earlier version, and
// reports whether the table has the value column. Asking first spares the
// statements a user may lack the privilege for: MariaDB wants CREATE even
// for a CREATE TABLE IF NOT EXISTS of a table that exists, and ALTER even
// for an ALTER TABLE that would change nothing (MySQL has no ADD COLUMN IF
// NOT EXISTS).
func (p *Provider) membersTable(ctx context.Context) (values bool, err error) {
	exists, values, err := p.membersColumns(ctx)
	if err == nil && !exists {
		q := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (grp VARBINARY(255), id VARBINARY(255),
expires_at DATETIME(6) NOT NULL, value MEDIUMBLOB, PRIMARY KEY (grp, id)) ENGINE=InnoDB`, p.sql.members)
		if _, err := p.db.ExecContext(ctx, q); err != nil {
			return false, fmt.Errorf("create it: %w", err)
		}
		// A Provider of an earlier version may have created it meanwhile.
		_, values, err = p.membersColumns(ctx)
	}
	switch {
	case err != nil:
		return false, fmt.Errorf("read its columns: %w", err)
	case values:
		return true, nil
	}
	return p.addValueColumn(ctx)
}

// membersColumns reports whether information_schema shows the members
// table, and whether it has the value column.
func (p *Provider) membersColumns(ctx context.Context) (exists, values bool, err error) {
	return p.tableColumn(ctx, p.opts.MembersTable, "value")
}

// tableColumn reports whether information_schema shows table (unquoted,
// optionally "db.table"), which lists only what this user may use, and
// whether it has column. Asking before a CREATE TABLE IF NOT EXISTS
// spares a user without the CREATE privilege the statement, which MariaDB
// refuses even for a table that exists.
func (p *Provider) tableColumn(ctx context.Context, table, column string) (exists, has bool, err error) {
	var schema any // nil: the connection's database
	if i := strings.IndexByte(table, '.'); i >= 0 {
		schema, table = table[:i], table[i+1:]
	}
	var n, v int
	err = p.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(COLUMN_NAME = ?), 0) FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?`, column, schema, table).Scan(&n, &v)
	return n > 0, v > 0, err
}

// addValueColumn adds the value column to the members table and reports
// whether the table has it: a duplicate column (error 1060), from a
// Provider that added it meanwhile, is success, and a user without the
// ALTER privilege (error 1142, ER_TABLEACCESS_DENIED_ERROR) leaves the
// table without it, unless the column was added meanwhile: the privilege
// is checked before the column, so information_schema is asked again.
func (p *Provider) addValueColumn(ctx context.Context) (bool, error) {
	_, err := p.db.ExecContext(ctx, addValueSQL(p.sql.members))
	if me := (*mysql.MySQLError)(nil); errors.As(err, &me) {
		switch me.Number {
		case 1060:
			return true, nil
		case 1142:
			_, values, err := p.membersColumns(ctx)
			return values, err
		}
	}
	if err != nil {
		return false, fmt.Errorf("add the value column: %w", err)
	}
	return true, nil
}

// addValueSQL is the statement that adds the value column to table
// (quoted).
func addValueSQL(table string) string {
	return "ALTER TABLE " + table + " ADD COLUMN value MEDIUMBLOB"
}

// noValues is the error of an Announce on a members table without the
// value column.
func (p *Provider) noValues() error {
	return fmt.Errorf("%w: members table %s has no value column and this user may not add it: run %s, then open a new Provider",
		core.ErrUnsupported, p.opts.MembersTable, addValueSQL(p.sql.members))
}

// upsertSQL is the statement that writes a member's row into the members
// table (%s), with its value when the table has the value column. Params:
// group, id, ttl in µs, and the value with values.
func upsertSQL(values bool) string {
	var cols, params, set string
	if values {
		cols, params, set = ", value", ", ?", ", value = VALUES(value)"
	}
	return `INSERT INTO %s (grp, id, expires_at` + cols + `) VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND` + params + `)
ON DUPLICATE KEY UPDATE expires_at = VALUES(expires_at)` + set
}

// memberStmts are the membership statements, prepared on the pool once
// per Provider: database/sql then prepares each once per connection it
// runs on, and a run costs one round trip, where a statement with
// arguments (and no interpolateParams in the DSN) would cost a prepare and
// a close around it every time. Close closes them.
type memberStmts struct {
	mu     sync.RWMutex // held for reading while a statement runs
	closed bool
	// Set by prepare, under mu, before the members setup succeeds; read
	// after it. Without values (no value column) upsert leaves the column
	// out and others is nil.
	values                              bool
	upsert, others, list, remove, purge *sql.Stmt
	lastPurge                           atomic.Int64 // unix ns of the last purge
}

// run runs f, which uses the statements, unless Close closed them: then
// it fails with errClosed.
func (m *memberStmts) run(f func() error) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return errClosed
	}
	return f()
}

// prepare prepares the statements on db for the quoted members table,
// with or without its value column.
func (m *memberStmts) prepare(ctx context.Context, db *sql.DB, table string, values bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errClosed
	}
	m.values = values
	type stmtSQL struct {
		s **sql.Stmt
		q string // with %s for the table
	}
	qs := []stmtSQL{
		{&m.upsert, upsertSQL(values)},
		{&m.list, `SELECT id FROM %s WHERE grp = ? AND expires_at > UTC_TIMESTAMP(6) ORDER BY id`},
		{&m.remove, `DELETE FROM %s WHERE grp = ? AND id = ?`},
		{&m.purge, `DELETE FROM %s WHERE grp = ? AND id <> ? AND expires_at < UTC_TIMESTAMP(6) - INTERVAL 1 HOUR`},
	}
	if values {
		qs = append(qs, stmtSQL{&m.others, `SELECT id, value FROM %s WHERE grp = ? AND id <> ? AND expires_at > UTC_TIMESTAMP(6) ORDER BY id`})
	}
	for _, s := range qs {
		st, err := db.PrepareContext(ctx, fmt.Sprintf(s.q, table))
		if err != nil {
			m.closeLocked()
			return err
		}
		*s.s = st
	}
	return nil
}

// close closes the statements; prepare fails after it.
func (m *memberStmts) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.closeLocked()
}

func (m *memberStmts) closeLocked() {
	for _, s := range []*sql.Stmt{m.upsert, m.others, m.list, m.remove, m.purge} {
		if s != nil {
			_ = s.Close()
		}
	}
}
