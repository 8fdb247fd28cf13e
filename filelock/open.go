package filelock

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/distlock/distlock/core/kit"
)

// Open returns a Provider for a file:// URL naming the lock directory by
// its absolute path, on this host:
//
//	file:///var/lock/app?identity=web-1&check_interval=500ms
//
// Parameters: identity (WithIdentity), check_interval (WithCheckInterval).
// opts apply after the URL's settings. A bad URL is an error matching
// core.ErrInvalidArgument that names the part at fault; Open does no I/O
// beyond New's.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Provider, error) {
	u, err := kit.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	var urlOpts []Option
	u.Text("identity", func(id string) { urlOpts = append(urlOpts, WithIdentity(id)) })
	u.Duration("check_interval", func(d time.Duration) { urlOpts = append(urlOpts, WithCheckInterval(d)) })
	switch {
	case u.Scheme != "file":
		return nil, u.Invalid("scheme", "filelock opens file://, not %s://", u.Scheme)
	case u.Err() != nil:
		return nil, u.Err()
	case u.User != nil:
		return nil, u.Invalid("user", "file:// takes no user")
	case len(u.Hosts) > 1 || len(u.Hosts) == 1 && u.Hosts[0] != "localhost":
		return nil, u.Invalid("host", "file:// names a directory on this host: file:///path or file://localhost/path")
	case u.Path == "" || u.Path == "/":
		return nil, u.Invalid("path", "file:// needs the lock directory, as in file:///var/lock/app")
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	dir := u.Path
	if runtime.GOOS == "windows" && len(dir) > 2 && dir[2] == ':' {
		dir = dir[1:] // file:///C:/locks
	}
	return New(filepath.FromSlash(strings.TrimSuffix(dir, "/")), append(urlOpts, opts...)...)
}
