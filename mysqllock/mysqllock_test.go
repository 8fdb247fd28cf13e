package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The driver logs every connection a test kills; the tests check what
	// the Provider makes of it.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	goleak.VerifyTestMain(m)
}

// testKeepalive is the keepalive cadence of the test Providers.
const testKeepalive = time.Second

// newDB returns a *sql.DB on DISTLOCK_MYSQL_DSN, closed when the test ends.
func newDB(t testing.TB) *sql.DB {
	t.Helper()
	dsn := locktest.RequireEnv(t, "DISTLOCK_MYSQL_DSN")
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// providers maps the test Providers, so Break can find a handle's connection.
var providers sync.Map // *Provider → struct{}

// newProvider returns a Provider with a short keepalive on a DB of its own,
// closed when the test ends.
func newProvider(t testing.TB, opts ...Option) *Provider {
	t.Helper()
	return newProviderOn(t, newDB(t), opts...)
}

func newProviderOn(t testing.TB, db *sql.DB, opts ...Option) *Provider {
	t.Helper()
	p, err := New(db, append([]Option{WithKeepalive(testKeepalive)}, opts...)...)
	require.NoError(t, err)
	providers.Store(p, struct{}{})
	t.Cleanup(func() {
		providers.Delete(p)
		require.NoError(t, p.Close())
	})
	return p
}

// uniqueName returns a lock name no other test or run uses.
func uniqueName(t testing.TB, suffix string) string {
	return fmt.Sprintf("mysqllock-test/%s/%08x/%s", t.Name(), rand.Uint32(), suffix)
}

// grantOf returns the grant behind h.
func grantOf(t testing.TB, h core.Handle) *grant {
	t.Helper()
	var found *grant
	providers.Range(func(k, _ any) bool {
		p := k.(*Provider)
		for _, c := range p.sess.Conns() {
			for _, g := range c.Grants() {
				if core.Handle(g.Handle()) == h {
					found = g
					return false
				}
			}
		}
		return true
	})
	require.NotNil(t, found, "no connection holds the handle")
	return found
}

// connID returns the server connection id of the session holding h.
func connID(t testing.TB, h core.Handle) uint64 { return grantOf(t, h).Session.Conn.id }

// kill ends the server session holding h, as an operator would.
func kill(t testing.TB, h core.Handle) {
	t.Helper()
	id := connID(t, h)
	_, err := newDB(t).Exec(fmt.Sprintf("KILL %d", id))
	require.NoError(t, err, "KILL %d", id)
}

// waitDone reports whether ctx is done within d.
func waitDone(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return true
	case <-t.C:
		return false
	}
}
