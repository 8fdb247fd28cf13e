package mysqllock

import (
	"fmt"
	"strings"
)

// The SQL is built only from fixed fragments and the validated table and
// sequence names; lock names, identities and timeouts are always bound
// parameters. Every statement runs on a Provider's own sessions, which run
// with autocommit on: a counter bump is committed, and durable as far as
// the server's settings make commits durable, before its grant is
// returned.

// quoteIdent quotes a validated, possibly schema-qualified, table or
// sequence name.
func quoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, ".", "`.`") + "`"
}

// statements builds a Provider's SQL.
type statements struct {
	fence   string // quoted fence sequence or table
	seq     bool   // fence is a sequence (the default)
	mark    string // quoted table whose commits make the sequence's blocks durable
	members string // quoted members table

	// The statements of every Mutex grant and handoff, built once.
	mutexGrant, drawSQL string
}

// prepare builds the statements that do not vary.
func (s *statements) prepare() {
	s.mutexGrant, s.drawSQL = s.grant(1, false), s.draw()
}

// grant is one statement that takes the first free lock among n candidate
// names, each with GET_LOCK(name, timeout), and draws a token only when
// one is granted. CASE runs its GET_LOCKs in order, at most once each, and
// stops at the first that grants. A semaphore's statement returns the
// token shifted left by 16 bits and the index of the granted candidate in
// the low 16, so that one round trip tells both.
//
// With the sequence it is a SELECT of one value: the token, NULL when
// nothing was granted. Params: (lock name, timeout seconds) per candidate.
//
// With the table it bumps the counter row and records the holder's
// identity and connection id in it; its rows-affected count is 0 when
// nothing was granted, and LAST_INSERT_ID (the OK packet's insert id) is
// the token. A semaphore's statement runs its CASE in a derived table that
// is materialized (LIMIT), so that the granted index is computed once.
// Params: row name, identity, then (lock name, timeout seconds) per
// candidate.
func (s *statements) grant(n int, sem bool) string {
	if n == 1 && !sem && s.mutexGrant != "" {
		return s.mutexGrant
	}
	if s.seq {
		var b strings.Builder
		for i := range n {
			if sem {
				fmt.Fprintf(&b, " WHEN GET_LOCK(?, ?) = 1 THEN NEXTVAL(%s) << 16 | %d", s.fence, i)
			} else {
				fmt.Fprintf(&b, " WHEN GET_LOCK(?, ?) = 1 THEN NEXTVAL(%s)", s.fence)
			}
		}
		return "SELECT CASE" + b.String() + " END"
	}
	const upsert = `INSERT INTO %s (name, token, holder, conn)
SELECT ?, LAST_INSERT_ID(%s), ?, CONNECTION_ID() FROM %s
ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(%s), holder = VALUES(holder), conn = VALUES(conn)`
	if !sem {
		return fmt.Sprintf(upsert, s.fence, "1", "DUAL WHERE GET_LOCK(?, ?) = 1", "token + 1")
	}
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, " WHEN GET_LOCK(?, ?) = 1 THEN %d", i)
	}
	from := "(SELECT CASE" + b.String() + " END AS slot LIMIT 1) AS g WHERE g.slot IS NOT NULL"
	return fmt.Sprintf(upsert, s.fence, "65536 | g.slot", from, "(((token >> 16) + 1) << 16) | g.slot")
}

// grantArgs returns the parameters of grant for cl, waiting timeout
// seconds on each lock.
func (s *statements) grantArgs(cl claim, identity string, timeout float64) []any {
	args := make([]any, 0, 2+2*len(cl.locks))
	if !s.seq {
		args = append(args, cl.row, identity)
	}
	for _, l := range cl.locks {
		args = append(args, l, timeout)
	}
	return args
}

// unlockSQL releases one lock of this session.
const unlockSQL = `DO RELEASE_LOCK(?)`

// unlockIfHeldSQL releases those of n lock names this session holds: the
// re-check after a grant statement failed, when the server may have granted
// a lock before the error (a wait interrupted at the moment of its grant, a
// counter bump that failed). Params: the names.
func unlockIfHeldSQL(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = "IF(IS_USED_LOCK(?) = CONNECTION_ID(), RELEASE_LOCK(?), 0)"
	}
	return "DO " + strings.Join(parts, ", ")
}

// draw draws a token only while this session holds a mutex's lock: the
// token of a local handoff. With the sequence it selects the token, NULL
// when the session does not hold the lock; params: lock name. With the
// table it bumps the counter row: one row affected and LAST_INSERT_ID is
// the token, none when the session does not hold the lock; params:
// identity, row name, lock name.
func (s *statements) draw() string {
	if s.drawSQL != "" {
		return s.drawSQL
	}
	if s.seq {
		return fmt.Sprintf(`SELECT CASE WHEN IS_USED_LOCK(?) = CONNECTION_ID() THEN NEXTVAL(%s) END`, s.fence)
	}
	return fmt.Sprintf(`UPDATE %s SET token = LAST_INSERT_ID(token + 1), holder = ?, conn = CONNECTION_ID()
WHERE name = ? AND IS_USED_LOCK(?) = CONNECTION_ID()`, s.fence)
}

// holder reads the identity and token recorded by the last grant of a
// mutex, when the session that made it holds the lock. Params: row name,
// lock name.
func (s *statements) holder() string {
	return fmt.Sprintf(`SELECT holder, token FROM %s WHERE name = ? AND conn = IS_USED_LOCK(?)`, s.fence)
}

// sessionSQL sets up one of the Provider's sessions: autocommit (a counter
// bump must commit at once and hold no row lock after it), and no idle
// timeout short enough to end a session that holds locks between pings.
const sessionSQL = `SET SESSION autocommit = 1, wait_timeout = 31536000`

// statementTimeoutSQL lifts MariaDB's statement timeout, which would end
// blocking waits. MySQL has no such variable (the error is ignored); its
// max_execution_time bounds read-only SELECTs only, and on MySQL
// (WithFenceTable) the statements that wait are INSERTs.
const statementTimeoutSQL = `SET SESSION max_statement_time = 0`
