package mysqllock

import (
	"context"
	"database/sql"
	"net"
	"reflect"
	"time"
	"unsafe"
)

// Bounding a statement. Every statement on a shared connection is bounded
// by the Provider's timeout (WithTimeout), so that a server that stopped
// answering fails the call instead of hanging it. database/sql and
// go-sql-driver/mysql only offer a context for that, and a cancellable
// context costs every statement a goroutine of database/sql's (for a
// query) and two hand-offs to the driver's watcher goroutine: measured
// here, that alone made a GET_LOCK + RELEASE_LOCK cycle 1.4 to 1.9 times as
// slow. So, like pglock, the Provider bounds a statement by a deadline on
// the connection's socket and runs it with a context that cannot be
// cancelled, which the driver and database/sql do not watch. A statement
// that overruns the deadline fails with a timeout and breaks the
// connection, which is then failed.
//
// The driver does not expose its socket: netConnOf reads it from the
// driver connection's netConn field, once per pinned connection. When that
// field is not there (another driver, or a version that renamed it), the
// connection falls back to a context deadline per statement: slower,
// bounded the same. TestSocketBound checks that the driver in go.mod takes
// the socket path.

// netConnOf returns the socket under sc when sc's driver connection is a
// go-sql-driver/mysql one that keeps it in a field netConn, or nil.
func netConnOf(ctx context.Context, sc *sql.Conn) net.Conn {
	var nc net.Conn
	_ = sc.Raw(func(dc any) error {
		v := reflect.ValueOf(dc)
		if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct ||
			v.Elem().Type().PkgPath() != "github.com/go-sql-driver/mysql" {
			return nil
		}
		f := v.Elem().FieldByName("netConn")
		if !f.IsValid() || f.Type() != reflect.TypeFor[net.Conn]() {
			return nil
		}
		nc = *(*net.Conn)(unsafe.Pointer(f.UnsafeAddr()))
		return nil
	})
	return nc
}

// bound bounds the next statements on c (locked) by the Provider's timeout
// and returns the context to run them with and a func to call after them.
// With c's socket, the context is context.Background(), which never ends
// and so is not watched (all the driver reads of a statement's context is
// its end), and the bound is the socket's deadline, kept between 3/4 of
// the timeout and the timeout ahead: it is moved only when it falls out of
// that range, so most statements set no deadline at all (each setting
// costs a timer update, and at times a wake-up of the runtime's network
// poller). Without the socket, it is a context deadline.
func (c *session) bound(ctx context.Context) (context.Context, func()) {
	if c.nc == nil {
		return c.p.opCtx(ctx)
	}
	t := c.p.opts.Timeout
	now := time.Now()
	if left := c.deadline.Sub(now); left < t*3/4 || left > t {
		c.setDeadline(now.Add(t))
	}
	return context.Background(), func() {}
}

// setDeadline sets c's socket deadline (zero: none); c is locked.
func (c *session) setDeadline(d time.Time) {
	c.deadline = d
	_ = c.nc.SetDeadline(d)
}
