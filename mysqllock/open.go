package mysqllock

import (
	"context"
	"database/sql"
	"strings"

	"github.com/distlock/distlock/core/kit"
	"github.com/go-sql-driver/mysql"
)

// Open returns a Provider on a *sql.DB it makes from rawURL and owns: the
// Provider's Close closes it.
//
//	mysql://[user[:password]@]host[:port]/database[?...]
//
// Parameters: identity (WithIdentity), keepalive, max_conns, timeout,
// handoff_max and handoff_span (WithLocalHandoff), fence_table,
// fence_sequence, members_table. Every other parameter belongs to the
// driver's DSN (go-sql-driver/mysql): tls, readTimeout, writeTimeout,
// charset, and so on. opts apply after the URL's settings.
//
// A bad URL is an error matching core.ErrInvalidArgument that names the
// part at fault. Open does no I/O: the pool connects on first use.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Provider, error) {
	u, urlOpts, err := kit.ParseSessionURL[Option](rawURL)
	if err != nil {
		return nil, err
	}
	rest := u.Rest()
	switch {
	case u.Scheme != "mysql":
		return nil, u.Invalid("scheme", "mysqllock opens mysql://, not %s://", u.Scheme)
	case u.Err() != nil:
		return nil, u.Err()
	case len(u.Hosts) != 1:
		return nil, u.Invalid("host", "mysql:// needs one host")
	case strings.Trim(u.Path, "/") == "" || strings.Contains(strings.Trim(u.Path, "/"), "/"):
		return nil, u.Invalid("path", "mysql:// needs a database name: mysql://host/database")
	}
	base := mysql.NewConfig() // the driver's defaults, native passwords allowed
	base.Net, base.Addr, base.DBName = "tcp", u.Hosts[0], strings.Trim(u.Path, "/")
	if u.User != nil {
		base.User = u.User.Username()
		base.Passwd, _ = u.User.Password()
	}
	dsn := base.FormatDSN()
	if q := rest.Encode(); q != "" {
		dsn += "?" + q
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, u.Invalid("driver parameters", "%v", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, u.Invalid("driver parameters", "%v", err)
	}
	db := sql.OpenDB(connector)
	p, err := New(db, append(urlOpts, opts...)...)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	p.owned = true
	return p, nil
}
