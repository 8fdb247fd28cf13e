package filelock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
)

// The conformance suite through a file:// URL.
func TestConformanceURL(t *testing.T) {
	cfg := conformance
	cfg.New = func(t testing.TB) core.Provider {
		dir := filepath.ToSlash(filepath.Join(os.Getenv(envDir), "url"))
		p, err := Open(context.Background(), "file://"+dir+"?identity=url-test&check_interval=200ms")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return p
	}
	locktest.TestProvider(t, cfg)
}

func TestOpenBadURL(t *testing.T) {
	for _, bad := range []string{
		"redis://h", "file://", "file:///", "file://host/dir", "file://u@localhost/dir",
		"file:///dir?ttl=1s", "file:///dir?check_interval=soon", "file:///dir?identity=",
		"file:///dir?check_interval=-1s",
	} {
		p, err := Open(context.Background(), bad)
		if !errors.Is(err, core.ErrInvalidArgument) {
			if p != nil {
				_ = p.Close()
			}
			t.Errorf("Open(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}
