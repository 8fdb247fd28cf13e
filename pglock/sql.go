package pglock

import "fmt"

// The SQL is built only from fixed fragments and the validated table names;
// keys, names and timeouts are always bound parameters.

type lockMode bool

const (
	exclusive lockMode = false
	shared    lockMode = true
)

func (m lockMode) suffix() string {
	if m == shared {
		return "_shared"
	}
	return ""
}

func (m lockMode) pgMode() string {
	if m == shared {
		return "ShareLock"
	}
	return "ExclusiveLock"
}

// keyArgs returns the argument list of an advisory-lock function for k,
// with placeholders numbered from $1, and the values to bind.
func keyArgs(k Key) (string, []any) {
	if k.pair {
		k1, k2 := k.Pair()
		return "($1::int4, $2::int4)", []any{k1, k2}
	}
	return "($1::int8)", []any{k.v}
}

// statements builds a Provider's SQL.
type statements struct {
	fence string // quoted fence table or sequence
	seq   bool   // fence is a sequence (WithFenceSequence)
}

// get builds a statement around the lock-function arguments of k; build
// gets the number of the first free placeholder.
func (s *statements) get(k Key, build func(call string, next int) string) (string, []any) {
	call, args := keyArgs(k)
	return build(call, len(args)+1), args
}

// upsert returns the CTE f that draws a token once for every row of from
// (that meets cond, when given): it bumps the counter row named by parameter
// $n and records the holder identity $id in it, or takes the sequence's
// next value. A sequence ignores $n and $id, which stay parameters so that
// both forms take the same arguments.
func (s *statements) upsert(from, cond string, n, id int) string {
	if s.seq {
		if cond != "" {
			cond = "AND " + cond
		}
		return fmt.Sprintf(`f AS (SELECT nextval('%s'::regclass) AS token FROM %s
  WHERE $%d::text IS NOT NULL AND $%d::text IS NOT NULL %s)`, s.fence, from, n, id, cond)
	}
	if cond != "" {
		cond = "WHERE " + cond
	}
	return fmt.Sprintf(`f AS (INSERT INTO %s AS t (key, token, holder) SELECT $%d::text, 1, $%d::text FROM %s %s
  ON CONFLICT (key) DO UPDATE SET token = t.token + 1, holder = EXCLUDED.holder RETURNING t.token)`, s.fence, n, id, from, cond)
}

// try: one statement that tries the lock and, only when granted, bumps the
// fence counter. Returns (ok bool, token bigint NULL). Params: key…, fence,
// identity.
func (s *statements) try(k Key, m lockMode) (string, []any) {
	return s.get(k, func(call string, n int) string {
		return fmt.Sprintf(`WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock%s%s AS ok),
%s
SELECT l.ok, (SELECT token FROM f) FROM l`, m.suffix(), call, s.upsert("l", "l.ok", n, n+1))
	})
}

// block: one statement that waits for the lock and bumps the fence
// counter. Returns token. Params: key…, fence, identity.
func (s *statements) block(k Key, m lockMode) (string, []any) {
	return s.get(k, func(call string, n int) string {
		return fmt.Sprintf(`WITH l AS MATERIALIZED (SELECT pg_advisory_lock%s%s),
%s
SELECT token FROM f`, m.suffix(), call, s.upsert("l", "", n, n+1))
	})
}

// blockTimed is block with a server-side timeout: it sets lock_timeout,
// waits, resets lock_timeout to 0 and bumps the fence counter. Params:
// key…, fence, identity, lock_timeout. On a lock_timeout error the setting
// reverts with the failed transaction, so the session is left at 0 either
// way.
func (s *statements) blockTimed(k Key, m lockMode) (string, []any) {
	return s.get(k, func(call string, n int) string {
		return fmt.Sprintf(`WITH s AS MATERIALIZED (SELECT set_config('lock_timeout', $%d::text, false)),
l AS MATERIALIZED (SELECT pg_advisory_lock%s%s FROM s),
r AS MATERIALIZED (SELECT set_config('lock_timeout', '0', false) FROM l),
%s
SELECT token FROM f`, n+2, m.suffix(), call, s.upsert("r", "", n, n+1))
	})
}

// unlock: returns whether the session held the lock.
func (s *statements) unlock(k Key, m lockMode) (string, []any) {
	return s.get(k, func(call string, _ int) string {
		return fmt.Sprintf(`SELECT pg_advisory_unlock%s%s`, m.suffix(), call)
	})
}

// releaseChannel is the NOTIFY channel of semaphore releases; the payload
// is the semaphore's fence key.
const releaseChannel = "distlock_pglock_release"

// unlockNotify releases an int64-space key and notifies releaseChannel
// with the payload wake, in one statement (delivered when it commits).
// Params: key, channel, payload.
func (s *statements) unlockNotify(k Key, wake string) (string, []any) {
	return `SELECT pg_advisory_unlock($1::int8) FROM (SELECT pg_notify($2, $3)) AS n`, []any{k.v, releaseChannel, wake}
}

// unlockIfHeld looks the lock up in pg_locks and unlocks it only when this
// session holds it: the re-check after a cancelled or timed-out wait, when
// the server may have granted the lock at the moment the wait ended.
// Params: key…, classid, objid, objsubid.
func (s *statements) unlockIfHeld(k Key, m lockMode) (string, []any) {
	q, args := s.get(k, func(call string, n int) string {
		return fmt.Sprintf(`SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'
  AND pid = pg_backend_pid() AND granted AND mode = '%s'
  AND classid = $%d::int8::oid AND objid = $%d::int8::oid AND objsubid = $%d::int2)
THEN pg_advisory_unlock%s%s ELSE false END`, m.pgMode(), n, n+1, n+2, m.suffix(), call)
	})
	c, o, sub := k.lockTag()
	return q, append(args, c, o, sub)
}

// trySlots tries the slot keys of a semaphore in order and takes the first
// free one, bumping the semaphore's fence counter when it got one. Returns
// (slot key bigint NULL, token bigint NULL). Params: keys int8[], fence,
// identity.
func (s *statements) trySlots() string {
	return fmt.Sprintf(`WITH l AS MATERIALIZED (SELECT k FROM unnest($1::int8[]) AS u(k) WHERE pg_try_advisory_lock(k) LIMIT 1),
%s
SELECT (SELECT k FROM l), (SELECT token FROM f)`, s.upsert("l", "", 2, 3))
}

// unlockSlotsIfHeldSQL releases those of the slot keys $1 this session
// holds, found in pg_locks.
const unlockSlotsIfHeldSQL = `SELECT count(*) FILTER (WHERE pg_advisory_unlock(k)) FROM unnest($1::int8[]) AS u(k)
WHERE EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
  AND mode = 'ExclusiveLock' AND objsubid = 1
  AND classid = ((k >> 32) & 4294967295)::oid AND objid = (k & 4294967295)::oid)`

// bump draws one token on its own. Params: fence, identity.
func (s *statements) bump() string {
	if s.seq {
		return fmt.Sprintf(`SELECT nextval('%s'::regclass) WHERE $1::text IS NOT NULL AND $2::text IS NOT NULL`, s.fence)
	}
	return fmt.Sprintf(`INSERT INTO %s AS t (key, token, holder) VALUES ($1::text, 1, $2::text)
ON CONFLICT (key) DO UPDATE SET token = t.token + 1, holder = EXCLUDED.holder RETURNING t.token`, s.fence)
}

// holder reads the holder recorded with the last token of the lock whose
// counter is $1, when some session holds that lock exclusively. Params:
// fence, classid, objid, objsubid.
func (s *statements) holder() string {
	return fmt.Sprintf(`SELECT coalesce(f.holder, ''), f.token FROM %s AS f WHERE f.key = $1::text
AND EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND mode = 'ExclusiveLock'
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND classid = $2::int8::oid AND objid = $3::int8::oid AND objsubid = $4::int2)`, s.fence)
}

// xact: a transaction-scoped lock call. Params: key….
func xactSQL(k Key, m lockMode, try bool) (string, []any) {
	call, args := keyArgs(k)
	fn := "pg_advisory_xact_lock"
	if try {
		fn = "pg_try_advisory_xact_lock"
	}
	q := fmt.Sprintf("SELECT %s%s%s", fn, m.suffix(), call)
	if !try {
		q = fmt.Sprintf("SELECT true FROM (SELECT %s%s%s) AS l", fn, m.suffix(), call)
	}
	return q, args
}

// resetTimeoutsSQL turns off, for one of the Provider's sessions, the
// server timeouts that would interfere with holding and waiting (those the
// server version has), and turns synchronous_commit on: a fence counter
// bump must be durable before its grant is returned, or a server crash
// could hand the same token out twice.
const resetTimeoutsSQL = `SELECT set_config(name, CASE name WHEN 'synchronous_commit' THEN 'on' ELSE '0' END, false)
FROM pg_settings
WHERE name IN ('lock_timeout', 'statement_timeout', 'idle_session_timeout', 'idle_in_transaction_session_timeout', 'synchronous_commit')`

// createFence creates the fence sequence or table; createMissing runs it
// only where the fence is missing.
func (s *statements) createFence() string {
	if s.seq {
		return fmt.Sprintf(`CREATE SEQUENCE IF NOT EXISTS %s`, s.fence)
	}
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (key text PRIMARY KEY, token bigint NOT NULL, holder text)`, s.fence)
}

// addHolder adds the holder column to a fence table made by an earlier
// version (which needs the table's owner).
func (s *statements) addHolder() string {
	return fmt.Sprintf(`ALTER TABLE %s ADD COLUMN IF NOT EXISTS holder text`, s.fence)
}
