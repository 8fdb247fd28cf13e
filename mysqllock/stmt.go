package mysqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
)

// Statements on a session. Each is prepared once per connection: a
// prepared statement runs in one round trip, where a query with arguments
// and no client-side interpolation costs a prepare and a close around it.
//
// On a go-sql-driver/mysql connection (one whose socket netConnOf found)
// a statement is prepared on, and run by, the driver's connection itself,
// inside sql.Conn.Raw, which hands it over exclusively for the call.
// database/sql's own work around a statement (its records of statements
// and connections, argument conversion, Rows and Row) costs about as much
// client CPU per statement as everything else the Provider does for a
// grant, and buys nothing here: the connection is pinned and its
// statements are serialized by the conn's lock. The driver gets the same
// arguments, checked by the statement's CheckNamedValue as database/sql
// would; it watches a context that can end (a blocking wait's) itself, as
// under database/sql; it returns the same errors (one that reports the
// connection bad makes Raw discard the connection, as a statement through
// database/sql would); and the result is read the same way. With any
// other driver the statements run through database/sql.

// stmt is a statement prepared on one connection: through database/sql
// (db), or on the driver's connection (dr).
type stmt struct {
	db *sql.Stmt
	dr driverStmt
}

// driverStmt is what a driver's statement must offer to be run directly.
type driverStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

// stmtCache keeps a connection's prepared statements by text.
type stmtCache map[string]stmt

// direct reports whether c's statements run on the driver's connection.
func (c *session) direct() bool { return c.nc != nil }

// exec runs q on c (locked), prepared once per connection, bounded by the
// Provider's timeout whatever ctx says (bound): the caller's ctx must never
// cancel a statement on a shared connection (the driver closes the socket
// to cancel one). A statement that overruns the bound breaks the
// connection, which is then failed.
func (c *session) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	ctx, unbound := c.bound(ctx)
	defer unbound()
	return c.execOn(ctx, q, args...)
}

// execOn runs q on c (locked) under ctx as it is.
func (c *session) execOn(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if !c.direct() {
		s, err := c.prepared(ctx, q)
		if err != nil {
			return nil, err
		}
		return s.ExecContext(ctx, args...)
	}
	var res sql.Result
	err := c.onDriver(ctx, q, args, func(s driverStmt, nv []driver.NamedValue) (err error) {
		res, err = s.ExecContext(ctx, nv)
		return err
	})
	return res, err
}

// onDriver runs f with q prepared on c's driver connection (inside Raw,
// c locked) and args as the driver takes them.
func (c *session) onDriver(ctx context.Context, q string, args []any, f func(driverStmt, []driver.NamedValue) error) error {
	return c.sc.Raw(func(dc any) error {
		s, err := c.preparedOn(ctx, dc, q)
		if err != nil {
			return err
		}
		nv, err := namedArgs(s, args)
		if err != nil {
			return err
		}
		return f(s, nv)
	})
}

// queryIntOn runs the query q, which returns one row of one integer
// column (NULL allowed), on c (locked) under ctx as it is.
func (c *session) queryIntOn(ctx context.Context, q string, args ...any) (sql.NullInt64, error) {
	var v sql.NullInt64
	if !c.direct() {
		s, err := c.prepared(ctx, q)
		if err != nil {
			return v, err
		}
		return v, s.QueryRowContext(ctx, args...).Scan(&v)
	}
	err := c.onDriver(ctx, q, args, func(s driverStmt, nv []driver.NamedValue) error {
		rows, err := s.QueryContext(ctx, nv)
		if err != nil {
			return err
		}
		err = scanFirst(rows, &v)
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		return err
	})
	return v, err
}

// queryInt is queryIntOn bounded as exec is.
func (c *session) queryInt(ctx context.Context, q string, args ...any) (sql.NullInt64, error) {
	ctx, unbound := c.bound(ctx)
	defer unbound()
	return c.queryIntOn(ctx, q, args...)
}

// scanFirst reads the first row of rows, one column, into v, as Row.Scan
// would: sql.ErrNoRows when there is none.
func scanFirst(rows driver.Rows, v *sql.NullInt64) error {
	if n := len(rows.Columns()); n != 1 {
		return fmt.Errorf("mysqllock: a query of one column returned %d", n)
	}
	vals := make([]driver.Value, 1)
	if err := rows.Next(vals); err != nil {
		if errors.Is(err, io.EOF) {
			return sql.ErrNoRows
		}
		return err
	}
	return v.Scan(vals[0])
}

// namedArgs returns args as the driver takes them, each checked by the
// statement's CheckNamedValue when it has one, as database/sql would.
func namedArgs(s driver.Stmt, args []any) ([]driver.NamedValue, error) {
	nv := make([]driver.NamedValue, len(args))
	check, _ := s.(driver.NamedValueChecker)
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
		if check == nil {
			continue
		}
		if err := check.CheckNamedValue(&nv[i]); err != nil {
			return nil, err
		}
	}
	return nv, nil
}

// prepared returns q prepared through database/sql on c (locked),
// preparing it the first time.
func (c *session) prepared(ctx context.Context, q string) (*sql.Stmt, error) {
	if s, ok := c.st[q]; ok {
		return s.db, nil
	}
	s, err := c.sc.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	c.st[q] = stmt{db: s}
	return s, nil
}

// preparedOn returns q prepared on dc, c's driver connection (inside Raw,
// c locked), preparing it the first time.
func (c *session) preparedOn(ctx context.Context, dc any, q string) (driverStmt, error) {
	if s, ok := c.st[q]; ok {
		return s.dr, nil
	}
	pc, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		return nil, fmt.Errorf("mysqllock: the driver connection %T cannot prepare with a context", dc)
	}
	ds, err := pc.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	s, ok := ds.(driverStmt)
	if !ok {
		_ = ds.Close()
		return nil, fmt.Errorf("mysqllock: the driver statement %T cannot run with a context", ds)
	}
	c.st[q] = stmt{dr: s}
	return s, nil
}

// closeStmts closes c's statements, then its connection, which the pool
// drops rather than reuses (Raw discards a connection whose function
// reports it bad).
func (c *session) closeStmts() {
	for _, s := range c.st {
		if s.db != nil {
			_ = s.db.Close()
		}
	}
	_ = c.sc.Raw(func(any) error {
		for _, s := range c.st {
			if s.dr != nil {
				_ = s.dr.Close()
			}
		}
		return driver.ErrBadConn
	})
	clear(c.st)
}
