package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// appendWork appends text to root's go.work.
func appendWork(t *testing.T, root, text string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(root, "go.work"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// workReplace is a go.work replace of each sibling at version with its
// directory.
func workReplace(version string, siblings ...string) string {
	var b strings.Builder
	for _, s := range siblings {
		b.WriteString("\nreplace " + testPrefix + s + " " + version + " => ./" + s + "\n")
	}
	return b.String()
}

func TestCheckCommand(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gomod string // cmd/x's go.mod tail
		work  string // go.work's tail
		want  []string
	}{
		{"replaced in go.work", "\nrequire " + testPrefix + "a v0.1.0\n", workReplace("v0.1.0", "a"), nil},
		{"not in go.work", "\nrequire " + testPrefix + "a v0.1.0\n", "",
			[]string{"go.work: want replace " + testPrefix + "a v0.1.0 => ./a (cmd/x requires it)"}},
		{"go.work at another version", "\nrequire " + testPrefix + "a v0.2.0\n", workReplace("v0.1.0", "a"),
			[]string{"go.work: want replace " + testPrefix + "a v0.2.0 => ./a"}},
		{"a replace of its own", requires("v0.1.0", "a"), workReplace("v0.1.0", "a"),
			[]string{"cmd/x/go.mod: replace " + testPrefix + "a: a command has no replace directive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := writeRepo(t, map[string]map[string]string{
				"a":     {"go.mod": ""},
				"cmd/x": {"go.mod": tc.gomod},
			})
			appendWork(t, root, tc.work)
			err := checkSiblings(load(t, root))
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

// TestBumpWork checks that bump moves go.work's replacements of a
// command's siblings to the new version with the requirements.
func TestBumpWork(t *testing.T) {
	root := writeRepo(t, map[string]map[string]string{
		"a":     {"go.mod": ""},
		"b":     {"go.mod": requires("v0.1.0", "a")},
		"cmd/x": {"go.mod": "\nrequire (\n\t" + testPrefix + "a v0.1.0\n\t" + testPrefix + "b v0.1.0\n)\n"},
	})
	appendWork(t, root, workReplace("v0.1.0", "a", "b"))
	var out bytes.Buffer
	if err := bump(root, testPrefix, "v0.2.0", &out); err != nil {
		t.Fatal(err)
	}
	r := load(t, root)
	if v, err := releaseVersion(r); v != "v0.2.0" || err != nil {
		t.Errorf("after bump: release version %q, %v", v, err)
	}
	if err := checkSiblings(r); err != nil {
		t.Errorf("after bump: %v", err)
	}
	if n := len(r.Work.Replace); n != 2 {
		t.Errorf("go.work has %d replace directives after bump, want 2", n)
	}
}

func TestSiblingSumsOnly(t *testing.T) {
	r := &repo{Prefix: testPrefix}
	const head = "diff current/go.sum tidy/go.sum\n--- current/go.sum\n+++ tidy/go.sum\n@@ -1,2 +1,4 @@\n"
	for _, tc := range []struct {
		name, diff string
		ok         bool
	}{
		{"none", "", true},
		{"the siblings' sums", head + "+example.com/x/a v0.1.0 h1:abc=\n+example.com/x/a v0.1.0/go.mod h1:def=\n+example.com/x v0.1.0 h1:ghi=\n golang.org/x/sys v0.1.0 h1:jkl=\n", true},
		{"another module's sum", head + "+golang.org/x/sys v0.1.0 h1:jkl=\n", false},
		{"a sibling's sum removed", head + "-example.com/x/a v0.1.0 h1:abc=\n", false},
		{"go.mod", "--- current/go.mod\n+++ tidy/go.mod\n@@ -3 +3 @@\n-\texample.com/x/a v0.1.0\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := siblingSumsOnly([]byte(tc.diff), r); (err == nil) != tc.ok {
				t.Errorf("siblingSumsOnly = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// TestProxyInstall packs a library and a command that requires it into a
// file:// proxy and installs the command from it, offline: go install
// works without a replace directive in the command's go.mod and fails
// with one, which is what check relies on.
func TestProxyInstall(t *testing.T) {
	const prog = `package main

import (
	"fmt"
	"runtime/debug"

	"example.com/x/a"
)

func main() {
	bi, _ := debug.ReadBuildInfo()
	fmt.Println("x", bi.Main.Version, a.A())
}
`
	for _, tc := range []struct {
		name  string
		gomod string // cmd/x's go.mod tail
		ok    bool
	}{
		{"no replace", "\nrequire " + testPrefix + "a v0.1.0\n", true},
		{"a replace", requires("v0.1.0", "a"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := writeRepo(t, map[string]map[string]string{
				"a":     {"go.mod": "", "a.go": "package a\n\nfunc A() int { return 1 }\n"},
				"cmd/x": {"go.mod": tc.gomod, "main.go": prog},
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
			err = c.install(testPrefix+"cmd/x", "v0.1.0")
			if (err == nil) != tc.ok {
				t.Fatalf("install: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
