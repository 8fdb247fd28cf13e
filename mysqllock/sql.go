package mysqllock

import (
	"fmt"
	"strings"
)

// The SQL is built only from fixed fragments and the validated table
// names; lock names, identities and timeouts are always bound parameters.
// Every statement runs on a Provider's own sessions, which run with
// autocommit on: a counter bump is committed, and durable as far as the
// server's settings make commits durable, before its grant is returned.

// quoteIdent quotes a validated, possibly schema-qualified, table name.
func quoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, ".", "`.`") + "`"
}

// statements builds a Provider's SQL.
type statements struct {
	fence   string // quoted fence table
	members string // quoted members table
}

// tokenExprs returns the token a grant writes into a fresh counter row and
// the one it writes over an existing row (whose value is token). A mutex
// counts 1, 2, 3...; a semaphore's token carries the granted slot (g.slot)
// in its low 16 bits, above which it counts, so that one round trip tells
// both which slot was granted and the token.
func tokenExprs(sem bool) (first, next string) {
	if sem {
		return "65536 | g.slot", "(((token >> 16) + 1) << 16) | g.slot"
	}
	return "1", "token + 1"
}

// grant is one statement that takes the first free lock among n candidate
// names, each with GET_LOCK(name, timeout), and, only when one is granted,
// bumps the counter row and records the holder's identity and connection
// id in it. Its rows-affected count is 0 when nothing was granted, and
// LAST_INSERT_ID (the OK packet's insert id) is then the token. The
// derived table is materialized (LIMIT), so each GET_LOCK runs at most
// once, in order, and CASE stops at the first that grants. Params: row
// name, identity, then (lock name, timeout seconds) per candidate.
func (s *statements) grant(n int, sem bool) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, " WHEN GET_LOCK(?, ?) = 1 THEN %d", i)
	}
	first, next := tokenExprs(sem)
	return fmt.Sprintf(`INSERT INTO %s (name, token, holder, conn)
SELECT ?, LAST_INSERT_ID(%s), ?, CONNECTION_ID()
FROM (SELECT CASE%s END AS slot LIMIT 1) AS g
WHERE g.slot IS NOT NULL
ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(%s), holder = VALUES(holder), conn = VALUES(conn)`,
		s.fence, first, b.String(), next)
}

// unlockSQL releases one lock of this session.
const unlockSQL = `DO RELEASE_LOCK(?)`

// unlockIfHeld releases those of n lock names this session holds: the
// re-check after a grant statement failed, when the server may have granted
// a lock before the error (a wait interrupted at the moment of its grant, a
// counter bump that failed). Params: the names.
func unlockIfHeld(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = "IF(IS_USED_LOCK(?) = CONNECTION_ID(), RELEASE_LOCK(?), 0)"
	}
	return "DO " + strings.Join(parts, ", ")
}

// draw bumps a mutex's counter row only while this session holds its lock:
// the token of a local handoff. One row affected: LAST_INSERT_ID is the
// token; none: the session does not hold the lock. Params: identity, row
// name, lock name.
func (s *statements) draw() string {
	return fmt.Sprintf(`UPDATE %s SET token = LAST_INSERT_ID(token + 1), holder = ?, conn = CONNECTION_ID()
WHERE name = ? AND IS_USED_LOCK(?) = CONNECTION_ID()`, s.fence)
}

// holder reads the identity and token recorded by the last grant of a
// mutex, when the session that made it holds the lock. Params: row name,
// lock name.
func (s *statements) holder() string {
	return fmt.Sprintf(`SELECT holder, token FROM %s WHERE name = ? AND conn = IS_USED_LOCK(?)`, s.fence)
}

func (s *statements) createFence() string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (name VARBINARY(64) PRIMARY KEY,
token BIGINT UNSIGNED NOT NULL, holder VARBINARY(1024), conn BIGINT UNSIGNED) ENGINE=InnoDB`, s.fence)
}

// sessionSQL sets up one of the Provider's sessions: autocommit (a counter
// bump must commit at once and hold no row lock after it), and no idle
// timeout short enough to end a session that holds locks between pings.
const sessionSQL = `SET SESSION autocommit = 1, wait_timeout = 31536000`

// statementTimeoutSQL lifts MariaDB's statement timeout, which would end
// blocking waits (MySQL has no such variable; its max_execution_time
// bounds SELECT statements only, and none of ours that wait).
const statementTimeoutSQL = `SET SESSION max_statement_time = 0`
