package main

import (
	"archive/zip"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testPrefix is the module path prefix of the repositories the tests make.
const testPrefix = "example.com/x/"

const zeroPseudo = "v0.0.0-00010101000000-000000000000"

// writeRepo makes a repository in a temporary directory: a go.work using
// each key of mods, and each module's go.mod (after a module line) and
// Go files.
func writeRepo(t *testing.T, mods map[string]map[string]string) string {
	t.Helper()
	root := t.TempDir()
	work := "go 1.24\n\nuse (\n"
	for dir, files := range mods {
		work += "\t./" + dir + "\n"
		for name, body := range files {
			if name == "go.mod" {
				body = "module " + testPrefix + dir + "\n\ngo 1.24\n" + body
			}
			p := filepath.Join(root, dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(root, "go.work"), []byte(work+")\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func load(t *testing.T, root string) *repo {
	t.Helper()
	r, err := loadRepo(root, testPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// requires is a go.mod tail requiring each sibling at version, with the
// replace directive to its directory.
func requires(version string, siblings ...string) string {
	var b strings.Builder
	for _, s := range siblings {
		b.WriteString("\nrequire " + testPrefix + s + " " + version + "\n")
		b.WriteString("\nreplace " + testPrefix + s + " => ../" + s + "\n")
	}
	return b.String()
}

func TestCheckVersion(t *testing.T) {
	for _, tc := range []struct {
		version string
		ok      bool
	}{
		{"v0.1.0", true},
		{"v1.4.2", true},
		{"v0.2.0-rc.1", true},
		{"0.1.0", false},
		{"v0.1", false},
		{"v2.0.0", false},
		{zeroPseudo, false},
		{"v0.1.1-0.20261123000000-abcdefabcdef", false},
	} {
		if err := checkVersion(tc.version); (err == nil) != tc.ok {
			t.Errorf("checkVersion(%q) = %v, want ok=%v", tc.version, err, tc.ok)
		}
	}
}

func TestReleaseVersion(t *testing.T) {
	for _, tc := range []struct {
		name      string
		b, c      string // versions at which b and c require a
		want      string
		wantError string
	}{
		{"one version", "v0.1.0", "v0.1.0", "v0.1.0", ""},
		{"a zero pseudo-version", zeroPseudo, "v0.1.0", "v0.1.0", "pseudo-version"},
		{"two versions", "v0.1.0", "v0.2.0", "v0.2.0", "at 2 versions"},
		{"no release version", zeroPseudo, zeroPseudo, "", "release version is unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := load(t, writeRepo(t, map[string]map[string]string{
				"a": {"go.mod": ""},
				"b": {"go.mod": requires(tc.b, "a")},
				"c": {"go.mod": requires(tc.c, "a")},
			}))
			got, err := releaseVersion(r)
			if got != tc.want {
				t.Errorf("version %q, want %q", got, tc.want)
			}
			switch {
			case tc.wantError == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantError != "" && (err == nil || !strings.Contains(err.Error(), tc.wantError)):
				t.Errorf("error %v, want one containing %q", err, tc.wantError)
			}
		})
	}
}

func TestCheckSiblings(t *testing.T) {
	r := load(t, writeRepo(t, map[string]map[string]string{
		"a":     {"go.mod": ""},
		"b":     {"go.mod": requires("v0.1.0", "a")},
		"c":     {"go.mod": "\nrequire " + testPrefix + "a v0.1.0\n"},
		"d":     {"go.mod": requires("v0.1.0", "tests")},
		"tests": {"go.mod": requires("v0.1.0", "a", "b")},
	}))
	err := checkSiblings(r)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"c/go.mod: want replace " + testPrefix + "a => ../a", "d requires tests, which is never published"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 2 {
		t.Errorf("%d errors, want 2: %v", n, err)
	}
}

func TestCheckOneVersion(t *testing.T) {
	for _, tc := range []struct {
		name, b, c string
		ok         bool
	}{
		{"same", "v1.12.1", "v1.12.1", true},
		{"different", "v1.12.1", "v1.10.0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := load(t, writeRepo(t, map[string]map[string]string{
				"b": {"go.mod": "\nrequire github.com/stretchr/testify " + tc.b + "\n"},
				"c": {"go.mod": "\nrequire github.com/stretchr/testify " + tc.c + " // indirect\n"},
			}))
			err := checkOneVersion(r)
			if (err == nil) != tc.ok {
				t.Errorf("checkOneVersion = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestCheckChangelog(t *testing.T) {
	root := t.TempDir()
	log := "# Changelog\n\n## [v0.2.0] - 2027-01-01\n\n## v0.1.0 - 2026-11-23\n\nsee v0.1.1\n"
	if err := os.WriteFile(filepath.Join(root, "CHANGELOG.md"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	for v, ok := range map[string]bool{"v0.2.0": true, "v0.1.0": true, "v0.1.1": false, "v0.2": false} {
		if err := checkChangelog(root, v); (err == nil) != ok {
			t.Errorf("checkChangelog(%s) = %v, want ok=%v", v, err, ok)
		}
	}
}

func TestBump(t *testing.T) {
	root := writeRepo(t, map[string]map[string]string{
		"a":     {"go.mod": ""},
		"b":     {"go.mod": requires(zeroPseudo, "a")},
		"tests": {"go.mod": requires(zeroPseudo, "a", "b")},
	})
	var out bytes.Buffer
	if err := bump(root, testPrefix, "v0.2.0", &out); err != nil {
		t.Fatal(err)
	}
	v, err := releaseVersion(load(t, root))
	if v != "v0.2.0" || err != nil {
		t.Errorf("after bump: release version %q, %v", v, err)
	}
	if err := checkSiblings(load(t, root)); err != nil {
		t.Errorf("bump lost a replace: %v", err)
	}
	for _, want := range []string{"  a/v0.2.0\n", "  b/v0.2.0\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks tag %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "tests/v0.2.0") {
		t.Errorf("output tags the unpublished tests module:\n%s", out.String())
	}
	if err := bump(root, testPrefix, zeroPseudo, &out); err == nil {
		t.Error("bump to a pseudo-version succeeded")
	}
}

// TestProxyGet packs two modules into a file:// proxy and fetches the one
// that requires the other from a consumer module, offline: it works with a
// release version in the requirement and fails with the zero
// pseudo-version, which is what check relies on.
func TestProxyGet(t *testing.T) {
	const prog = "package main\n\nimport \"example.com/x/b\"\n\nfunc main() { b.B() }\n"
	for _, tc := range []struct {
		name    string
		version string // at which b requires a
		ok      bool
	}{
		{"release version", "v0.1.0", true},
		{"zero pseudo-version", zeroPseudo, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := writeRepo(t, map[string]map[string]string{
				"a": {"go.mod": "", "a.go": "package a\n\nfunc A() int { return 1 }\n"},
				"b": {
					"go.mod": requires(tc.version, "a"),
					"b.go":   "package b\n\nimport \"example.com/x/a\"\n\nfunc B() int { return a.A() }\n",
				},
			})
			r := load(t, root)
			work := t.TempDir()
			proxyDir := filepath.Join(work, "proxy")
			if err := writeProxy(proxyDir, root, r.published(), "v0.1.0", time.Now()); err != nil {
				t.Fatal(err)
			}
			c, err := newConsumer(filepath.Join(work, "consumer"), proxyDir, filepath.Join(work, "modcache"), testPrefix, []string{"off"})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.goCmd("get", testPrefix+"b@v0.1.0")
			if (err == nil) != tc.ok {
				t.Fatalf("go get: %v, want ok=%v", err, tc.ok)
			}
			if !tc.ok {
				return
			}
			if err := os.WriteFile(filepath.Join(c.dir, "main.go"), []byte(prog), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := c.goCmd("build", "./..."); err != nil {
				t.Fatal(err)
			}
			if err := c.checkBuildList(testPrefix, "v0.1.0"); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestCheckDeps(t *testing.T) {
	const pfx = "github.com/distlock/distlock/"
	redis := program{name: "redislock", uses: []string{"core", "redislock"}, drivers: []string{goRedis}}
	for _, tc := range []struct {
		name string
		deps []string
		want []string // substrings of the error; none: no error
	}{
		{"own driver only", []string{pfx + "core", pfx + "redislock", goRedis, "golang.org/x/sys"}, nil},
		{"another driver", []string{pfx + "core", pfx + "redislock", goRedis, pgx}, []string{"another backend's driver " + pgx}},
		{"no driver", []string{pfx + "core", pfx + "redislock"}, []string{"its driver " + goRedis}},
		{"not built", []string{pfx + "core", goRedis}, []string{"does not build " + pfx + "redislock"}},
		{"test-only", []string{pfx + "core", pfx + "redislock", goRedis, "go.uber.org/goleak"}, []string{"test-only module go.uber.org/goleak"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deps := map[string]bool{}
			for _, d := range tc.deps {
				deps[d] = true
			}
			err := checkDeps(redis, pfx, deps)
			if len(tc.want) == 0 && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v lacks %q", err, w)
				}
			}
		})
	}
}

// TestProgramsExist checks that every program the check builds has its
// source here.
func TestProgramsExist(t *testing.T) {
	for _, p := range programs {
		if _, err := os.Stat(filepath.Join("programs", p.name, "main.go")); err != nil {
			t.Error(err)
		}
	}
}

// TestZipLicense checks that a module zip holds the module's LICENSE, or
// else the repository's, as the go command packs a tag.
func TestZipLicense(t *testing.T) {
	root := writeRepo(t, map[string]map[string]string{
		"a": {"go.mod": "", "a.go": "package a\n"},
		"b": {"go.mod": "", "b.go": "package b\n", "LICENSE": "b's own\n"},
	})
	if err := os.WriteFile(filepath.Join(root, "LICENSE"), []byte("the repository's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	proxyDir := t.TempDir()
	if err := writeProxy(proxyDir, root, load(t, root).published(), "v0.1.0", time.Now()); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{"a": "the repository's\n", "b": "b's own\n"} {
		zr, err := zip.OpenReader(filepath.Join(proxyDir, "example.com", "x", dir, "@v", "v0.1.0.zip"))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		var names []string
		for _, f := range zr.File {
			names = append(names, f.Name)
		}
		data, err := fs.ReadFile(zr, testPrefix+dir+"@v0.1.0/LICENSE")
		if err != nil || string(data) != want {
			t.Errorf("%s's zip (%v): LICENSE %q, %v; want %q", dir, names, data, err, want)
		}
	}
}
