// Package urls opens the Provider an example program is pointed at.
package urls

import (
	"context"
	"net/url"
	"os"
	"path/filepath"

	"github.com/distlock/distlock"
)

// Default is a file:// URL of a directory under the system's temporary
// directory, so that the examples run with no server.
func Default(dir string) string {
	return "file://" + filepath.ToSlash(filepath.Join(os.TempDir(), dir))
}

// Open opens rawURL with distlock.Open, recording id as the holder
// identity (the identity parameter) unless the URL sets one, so that
// core.Inspector, and an election's followers, name this process.
func Open(ctx context.Context, rawURL, id string) (distlock.Provider, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return distlock.Open(ctx, rawURL) // names the part at fault
	}
	q := u.Query()
	if q.Get("identity") == "" && id != "" {
		q.Set("identity", id)
		u.RawQuery = q.Encode()
	}
	return distlock.Open(ctx, u.String())
}

// Redacted returns rawURL with its password, if any, replaced, for logs.
func Redacted(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
