package kit

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		raw, path string
		hosts     []string
	}{
		{"redis://h:6379/2", "/2", []string{"h:6379"}},
		{"redis://u:p%40ss@h", "", []string{"h"}},
		{"redlock://a:1,b:2,[::1]:3/0?ttl=1s", "/0", []string{"a:1", "b:2", "[::1]:3"}},
		{"file:///var/lock/app", "/var/lock/app", nil},
		{"mem://", "", nil},
		{"POSTGRES://h/db?sslmode=disable", "/db", []string{"h"}},
	} {
		u, err := ParseURL(c.raw)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", c.raw, err)
			continue
		}
		if u.Path != c.path || !slices.Equal(u.Hosts, c.hosts) {
			t.Errorf("ParseURL(%q): path %q hosts %q, want %q %q", c.raw, u.Path, u.Hosts, c.path, c.hosts)
		}
	}
	for _, c := range []struct{ raw, part string }{
		{"", "scheme"},
		{"localhost:6379", "scheme"},
		{"://h", "scheme"},
		{"re dis://h", "scheme"},
		{"redis://h#frag", "fragment"},
		{"redis://h:port", "host"},
		{"redis://h:0", "host"},
		{"redis://h:", "host"},
		{"redis://a,,b", "host"},
		{"redis://:6379", "host"},
		{"redis://[::1", "host"},
		{"redis://h/%zz", "URL"},
		{"redis://h?a=%zz", "query"},
	} {
		_, err := ParseURL(c.raw)
		if !errors.Is(err, core.ErrInvalidArgument) || !strings.Contains(err.Error(), ": "+c.part+": ") {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalidArgument naming %s", c.raw, err, c.part)
		}
	}
}

func TestURLHidesPassword(t *testing.T) {
	for _, raw := range []string{
		"redis://user:s3cret@h:1?ttl=x",
		"redis://user:s3cret@h:port",
		"redis://user:s3cret@h#f",
		"postgres://user:s3cret@a,b/db?keepalive=x",
	} {
		u, err := ParseURL(raw)
		if err == nil {
			u.Duration("ttl", func(time.Duration) {})
			u.Duration("keepalive", func(time.Duration) {})
			err = u.Err()
		}
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "user:xxxxx@") {
			t.Errorf("%q: %v: want an error with the password redacted", raw, err)
		}
	}
}

func TestURLParams(t *testing.T) {
	u, err := ParseURL("nats://h?ttl=2s&bucket=b&n=3&driver=x")
	if err != nil {
		t.Fatal(err)
	}
	var ttl time.Duration
	var bucket string
	var n int
	u.Duration("ttl", func(d time.Duration) { ttl = d })
	u.Text("bucket", func(s string) { bucket = s })
	u.Int("n", func(i int) { n = i })
	u.Int("absent", func(int) { t.Error("set called for an absent parameter") })
	if ttl != 2*time.Second || bucket != "b" || n != 3 {
		t.Fatalf("read %v %q %d", ttl, bucket, n)
	}
	if err := u.Err(); !errors.Is(err, core.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "parameter driver: unknown: nats:// takes absent, bucket, n, ttl") {
		t.Fatalf("Err = %v", err)
	}
	if rest := u.Rest(); rest.Encode() != "driver=x" || u.Err() != nil {
		t.Fatalf("Rest = %v, then Err = %v", rest, u.Err())
	}
	if got := u.Format("redis", []string{"a:1", "b:2"}, url.Values{"k": {"v"}}); got != "redis://a:1,b:2?k=v" {
		t.Fatalf("Format = %q", got)
	}

	for raw, part := range map[string]string{
		"x://h?ttl=abc":       "parameter ttl",
		"x://h?ttl=1s&ttl=2s": "parameter ttl",
		"x://h?ttl=":          "parameter ttl",
		"x://h?n=1.5":         "parameter n",
	} {
		u, _ := ParseURL(raw)
		u.Duration("ttl", func(time.Duration) {})
		u.Int("n", func(int) {})
		if err := u.Err(); !errors.Is(err, core.ErrInvalidArgument) || !strings.Contains(err.Error(), part+": ") {
			t.Errorf("%q: %v, want an error naming %s", raw, err, part)
		}
	}
}
