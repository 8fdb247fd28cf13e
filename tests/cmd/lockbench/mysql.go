package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"

	_ "github.com/go-sql-driver/mysql"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/mysqllock"
)

// mysqlCases returns the contenders for the MySQL/MariaDB backend, or an
// error if DISTLOCK_MYSQL_DSN is unset.
//
//   - mysql-raw-get-lock: the raw floor, what a user writes by hand:
//     GET_LOCK(name, 0) / a blocking GET_LOCK(name, 3600), then
//     RELEASE_LOCK, as prepared statements (one round trip each) on one
//     connection per Locker (a user-level lock belongs to its session, and a
//     blocking wait occupies it). No fencing, no loss detection.
//   - mysql-raw-get-lock-nextval: the same with a fencing token, the
//     sequence's NEXTVAL drawn in the GET_LOCK statement as mysqllock
//     draws it: what the token alone costs on the server.
//   - mysqllock: this repository's backend with its defaults, one Provider
//     shared by every Locker (multiplexed connections, a fencing token from
//     a MariaDB sequence drawn in the lock statement, keepalive, local
//     handoff).
//   - mysqllock-table: the same with mysqllock.WithFenceTable (a counter
//     row per lock, bumped with the holder's identity in the lock
//     statement: a row write and a commit in every grant, for
//     core.Inspector).
func mysqlCases() ([]benchCase, func(), error) {
	dsn := os.Getenv("DISTLOCK_MYSQL_DSN")
	if dsn == "" {
		return nil, nil, errors.New("DISTLOCK_MYSQL_DSN is not set")
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("mysql: %w", err)
	}
	locks, err := mysqllock.New(db)
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("mysql: %w", err)
	}
	tableLocks, err := mysqllock.New(db, mysqllock.WithFenceTable(mysqllock.DefaultFenceTable))
	if err != nil {
		_ = locks.Close()
		_ = db.Close()
		return nil, nil, fmt.Errorf("mysql: %w", err)
	}
	// A first grant creates the fence sequence the raw token case draws from.
	if h, err := locks.Mutex("lockbench/setup").TryAcquire(context.Background()); err == nil {
		_ = h.Release(context.Background())
	}
	var mu sync.Mutex
	var raws []*rawMySQL
	cleanup := func() {
		_ = locks.Close()
		_ = tableLocks.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, r := range raws {
			r.close()
		}
		_ = db.Close()
	}
	raw := func(token bool) func(name string) core.Locker {
		return func(name string) core.Locker {
			r, err := newRawMySQL(db, name, token)
			if err != nil {
				return kit.FailedLocker(name, err)
			}
			mu.Lock()
			raws = append(raws, r)
			mu.Unlock()
			return r
		}
	}
	return []benchCase{
		{Name: "mysql-raw-get-lock", New: raw(false)},
		{Name: "mysql-raw-get-lock-nextval", New: raw(true)},
		{Name: "mysqllock", New: func(name string) core.Locker { return locks.Mutex(name) }},
		{Name: "mysqllock-table", New: func(name string) core.Locker { return tableLocks.Mutex(name) }},
	}, cleanup, nil
}

// rawMySQL is the hand-written floor: one user-level lock per call on the
// Locker's own connection, with prepared statements; with token, each
// grant also draws NEXTVAL of mysqllock's default fence sequence in the
// same statement (the sequence must exist: the mysqllock cases create it).
type rawMySQL struct {
	name                string
	conn                *sql.Conn
	try, block, release *sql.Stmt
}

func newRawMySQL(db *sql.DB, name string, token bool) (*rawMySQL, error) {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	r := &rawMySQL{name: name, conn: conn}
	try, block := "SELECT GET_LOCK(?, 0)", "SELECT GET_LOCK(?, 3600)"
	if token {
		const q = "SELECT CASE WHEN GET_LOCK(?, %d) = 1 THEN NEXTVAL(" + mysqllock.DefaultFenceSequence + ") END"
		try, block = fmt.Sprintf(q, 0), fmt.Sprintf(q, 3600)
	}
	for _, s := range []struct {
		stmt **sql.Stmt
		q    string
	}{{&r.try, try}, {&r.block, block}, {&r.release, "DO RELEASE_LOCK(?)"}} {
		if *s.stmt, err = conn.PrepareContext(ctx, s.q); err != nil {
			r.close()
			return nil, err
		}
	}
	return r, nil
}

func (l *rawMySQL) close() {
	for _, s := range []*sql.Stmt{l.try, l.block, l.release} {
		if s != nil {
			_ = s.Close()
		}
	}
	_ = l.conn.Close()
}

func (l *rawMySQL) Name() string { return l.name }

func (l *rawMySQL) TryAcquire(ctx context.Context) (core.Handle, error) {
	return l.get(ctx, l.try)
}

func (l *rawMySQL) Acquire(ctx context.Context) (core.Handle, error) {
	return l.get(ctx, l.block)
}

func (l *rawMySQL) get(ctx context.Context, s *sql.Stmt) (core.Handle, error) {
	var ok sql.NullInt64
	if err := s.QueryRowContext(ctx, l.name).Scan(&ok); err != nil {
		return nil, err
	}
	if !ok.Valid || ok.Int64 < 1 {
		return nil, kit.Busy("held")
	}
	return kit.NewHandle(uint64(ok.Int64), func(ctx context.Context) error {
		_, err := l.release.ExecContext(ctx, l.name)
		return err
	}), nil
}
