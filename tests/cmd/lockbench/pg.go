package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/pglock"
)

// pgCases returns the contenders for the PostgreSQL backend, or an error if
// DISTLOCK_PG_URL is unset.
//
//   - pg-raw-advisory: the raw floor, what a user writes by hand:
//     pg_try_advisory_lock / pg_advisory_lock then pg_advisory_unlock on one
//     connection per Locker (a session lock belongs to its connection, and a
//     blocking wait occupies it). No fencing, no loss detection.
//   - pglock: this repository's backend with its defaults, one Provider
//     shared by every Locker (multiplexed connections, a fencing token from
//     one sequence drawn in the lock statement, keepalive).
//   - pglock-table: the same with pglock.WithFenceTable (a counter row per
//     lock, bumped with the holder's identity in the lock statement: a row
//     write and a commit in every handover, for core.Inspector).
func pgCases() ([]benchCase, func(), error) {
	url := os.Getenv("DISTLOCK_PG_URL")
	if url == "" {
		return nil, nil, errors.New("DISTLOCK_PG_URL is not set")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, nil, fmt.Errorf("pg: %w", err)
	}
	locks, err := pglock.New(pool)
	if err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("pg: %w", err)
	}
	tableLocks, err := pglock.New(pool, pglock.WithFenceTable(pglock.DefaultFenceTable))
	if err != nil {
		_ = locks.Close()
		pool.Close()
		return nil, nil, fmt.Errorf("pg: %w", err)
	}
	var mu sync.Mutex
	var conns []*pgx.Conn
	cleanup := func() {
		_ = locks.Close()
		_ = tableLocks.Close()
		pool.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close(ctx)
		}
	}
	raw := func(name string) core.Locker {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return kit.FailedLocker(name, err)
		}
		mu.Lock()
		conns = append(conns, conn)
		mu.Unlock()
		k, err := pglock.KeyOf(name)
		if err != nil {
			return kit.FailedLocker(name, err)
		}
		return &rawPG{name: name, conn: conn, key: k.Int64()}
	}
	return []benchCase{
		{Name: "pg-raw-advisory", New: raw},
		{Name: "pglock", New: func(name string) core.Locker { return locks.Mutex(name) }},
		{Name: "pglock-table", New: func(name string) core.Locker { return tableLocks.Mutex(name) }},
	}, cleanup, nil
}

// rawPG is the hand-written floor: one session advisory lock per call on
// the Locker's own connection.
type rawPG struct {
	name string
	conn *pgx.Conn
	key  int64
}

func (l *rawPG) Name() string { return l.name }

func (l *rawPG) TryAcquire(ctx context.Context) (core.Handle, error) {
	var ok bool
	if err := l.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", l.key).Scan(&ok); err != nil {
		return nil, err
	}
	if !ok {
		return nil, kit.Busy("held")
	}
	return l.handle(), nil
}

func (l *rawPG) Acquire(ctx context.Context) (core.Handle, error) {
	if _, err := l.conn.Exec(ctx, "SELECT pg_advisory_lock($1)", l.key); err != nil {
		return nil, err
	}
	return l.handle(), nil
}

func (l *rawPG) handle() core.Handle {
	return kit.NewHandle(1, func(ctx context.Context) error {
		_, err := l.conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", l.key)
		return err
	})
}
