// Command release prepares and checks a release of distlock's modules. Run
// it through scripts/release.sh and make release-check:
//
//	go run ./tests/cmd/release bump VERSION
//	go run ./tests/cmd/release check [-keep]
//	go run ./tests/cmd/release tidy
//
// The modules require each other at the release version (v0.1.0, not a
// pseudo-version), and each keeps a replace directive to its siblings'
// directories for work inside the repository; the go command ignores the
// replace directives of a dependency, so users get the siblings at that
// version from the module proxy. The commands (modules under cmd/) are the
// exception: go install refuses a module with a replace directive, so
// go.work replaces their siblings instead (see isCommand). Every module of
// go.work but examples and tests is published, each tagged <dir>/VERSION
// (core/v0.1.0; the root module VERSION alone).
//
// bump sets every sibling requirement, in every module of go.work, and
// go.work's replacements of the siblings to VERSION, and prints the tags
// to push.
//
// tidy runs go mod tidy in the commands, outside the workspace, against
// the published modules packed into a throwaway proxy, and keeps the
// siblings' sums out of their go.sum.
//
// check fails unless all of this holds:
//   - every sibling requirement names one release version, the one in the
//     repository, and CHANGELOG.md has a "## [VERSION]" heading;
//   - each sibling required is a module of go.work, a published one when
//     a published module requires it, with a replace directive to its
//     directory; a command has no replace directive, and go.work replaces
//     each sibling it requires, at the version required, with its
//     directory;
//   - a dependency two modules require is required at one version;
//   - go mod tidy -diff is clean in every module, in a command but for the
//     siblings' sums (against the packed modules below);
//   - the published modules, packed at that version into a throwaway
//     file:// module proxy, can each be fetched with go get by a new module
//     outside the workspace, whose build list then has every distlock
//     module at that version; there a program per backend, election and
//     polllease (programs/) builds, runs if it needs no server, and has in
//     its build its own backend's driver and none of another backend's
//     drivers or of the test-only modules;
//   - go install <command>@VERSION succeeds there (GOWORK=off) into a new
//     GOBIN, and the installed "<command> version" prints its name and
//     VERSION.
//
// It prints one line per check and ends with "release-check: N passed, N
// failed". -keep keeps the throwaway proxy and consumer modules and prints
// where they are.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: release bump VERSION | release check [-keep] | release tidy")
	}
	flag.Parse()
	root, err := findRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	args := flag.Args()
	switch {
	case len(args) == 2 && args[0] == "bump":
		err = bump(root, modulePrefix, args[1], os.Stdout)
	case len(args) == 1 && args[0] == "tidy":
		err = tidy(root, os.Stdout)
	case len(args) >= 1 && args[0] == "check":
		fs := flag.NewFlagSet("check", flag.ExitOnError)
		keep := fs.Bool("keep", false, "keep the throwaway proxy and consumer modules")
		_ = fs.Parse(args[1:]) // ExitOnError
		err = check(root, *keep, os.Stdout)
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// findRoot returns the nearest directory, from the current one up, that
// holds go.work.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work in this directory or above it")
		}
		dir = parent
	}
}

// bump sets every sibling requirement in every module of the repository at
// root (module paths prefix + directory), and go.work's replacements of the
// siblings, to version (go mod edit; go.work rewritten in place), and prints the
// tags of the published modules.
func bump(root, prefix, version string, w io.Writer) error {
	if err := checkVersion(version); err != nil {
		return err
	}
	r, err := loadRepo(root, prefix)
	if err != nil {
		return err
	}
	for _, m := range r.Modules {
		args := []string{"mod", "edit"}
		for _, req := range r.siblingRequires(m) {
			args = append(args, "-require="+req.Mod.Path+"@"+version)
		}
		if len(args) == 2 {
			continue
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = filepath.Join(root, filepath.FromSlash(m.Dir))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: go mod edit: %v\n%s", m.Dir, err, out)
		}
	}
	if err := bumpWork(r, version); err != nil {
		return err
	}
	fmt.Fprintf(w, "Every sibling requirement is now %s. Next: a \"## [%s]\" section in CHANGELOG.md,\n", version, version)
	fmt.Fprintln(w, "make release-check, a commit, and on that commit one tag per published module:")
	var tags []string
	for _, m := range r.published() {
		tags = append(tags, tagOf(m.Dir, version))
		fmt.Fprintln(w, "  "+tagOf(m.Dir, version))
	}
	fmt.Fprintf(w, "e.g. for t in %s; do git tag -a \"$t\" -m \"$t\"; done; git push origin %s\n",
		strings.Join(tags, " "), strings.Join(tags, " "))
	return nil
}

// tagOf is the tag of the module in dir at version: the version alone for
// the module at the repository root, dir/version for the others.
func tagOf(dir, version string) string {
	if dir == "." {
		return version
	}
	return dir + "/" + version
}

// A report prints one line per check, with the time since the previous
// one, and counts them.
type report struct {
	w              io.Writer
	last           time.Time
	passed, failed int
}

// check prints name's outcome and reports whether err is nil.
func (r *report) check(name string, err error) bool {
	took := time.Since(r.last).Round(100 * time.Millisecond)
	r.last = time.Now()
	if err == nil {
		r.passed++
		fmt.Fprintf(r.w, "ok   %s (%s)\n", name, took)
		return true
	}
	r.failed++
	fmt.Fprintf(r.w, "FAIL %s (%s)\n", name, took)
	for line := range strings.Lines(err.Error()) {
		fmt.Fprintf(r.w, "     %s\n", strings.TrimRight(line, "\n"))
	}
	return false
}

// check runs the release check of the repository at root (see the package
// doc) and returns an error when any part of it failed.
func check(root string, keep bool, w io.Writer) error {
	r, err := loadRepo(root, modulePrefix)
	if err != nil {
		return err
	}
	rep := &report{w: w, last: time.Now()}
	var names []string
	for _, m := range r.published() {
		names = append(names, m.Dir)
	}
	fmt.Fprintf(w, "==> release-check: published %s\n", strings.Join(names, " "))
	version, err := releaseVersion(r)
	rep.check("sibling requirements name one release version: "+version, err)
	rep.check("sibling requirements are published modules with a replace to their directory (a command's in go.work)", checkSiblings(r))
	rep.check("a dependency of several modules is required at one version", checkOneVersion(r))
	if version != "" {
		rep.check("CHANGELOG.md has a section for "+version, checkChangelog(root, version))
	}
	rep.check("go mod tidy -diff is clean in every module but the commands", checkTidy(r))
	if version != "" {
		if err := checkPublished(r, version, keep, rep); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "release-check: %d passed, %d failed\n", rep.passed, rep.failed)
	if rep.failed > 0 {
		return fmt.Errorf("%d release checks failed", rep.failed)
	}
	return nil
}

// checkPublished packs the published modules at version into a throwaway
// proxy and checks each from a new consumer module, as a user who starts
// with that module alone (see the package doc). Its error is one that
// stopped it from checking at all.
func checkPublished(r *repo, version string, keep bool, rep *report) error {
	work, err := os.MkdirTemp("", "distlock-release-check-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintln(rep.w, "     kept:", work)
	} else {
		defer os.RemoveAll(work)
	}
	proxyDir := filepath.Join(work, "proxy")
	if !rep.check("pack the published modules at "+version+" into "+fileURL(proxyDir),
		writeProxy(proxyDir, r.Root, r.published(), version, time.Now())) {
		return nil
	}
	fallback, err := fallbackProxies()
	if err != nil {
		return err
	}
	modcache := filepath.Join(work, "modcache")
	for _, m := range r.commands() {
		rep.check(m.Dir+": go mod tidy -diff against the packed modules adds only their sums",
			checkCommandTidy(r, m, proxyDir, modcache, fallback))
	}
	for _, m := range r.published() {
		c, err := newConsumer(filepath.Join(work, "consumer", m.Dir), proxyDir, modcache, r.Prefix, fallback)
		if err != nil {
			return err
		}
		// One module per consumer: a go get of several at once would let
		// one's requirement at version hide another's at an older one.
		if _, err := c.goCmd("get", m.Path+"@"+version); !rep.check("go get "+m.Path+"@"+version+" in a new module", err) {
			continue
		}
		rep.check(m.Dir+": the build list has every distlock module at "+version, c.checkBuildList(r.Prefix, version))
		if isCommand(m.Dir) {
			rep.check(fmt.Sprintf("go install %s@%s with GOWORK=off, and %s version", m.Path, version, path.Base(m.Path)),
				c.install(m.Path, version))
		}
		for _, p := range programs {
			if p.name == m.Dir {
				checkProgram(rep, c, p, r)
			}
		}
	}
	return nil
}

// checkProgram builds p in the consumer c, checks its build's modules, and
// runs it if it needs no server.
func checkProgram(rep *report, c *consumer, p program, r *repo) {
	src := filepath.Join(r.Root, "tests", "cmd", "release", "programs", p.name, "main.go")
	err := c.build(src)
	if !rep.check(p.name+" program builds", err) {
		return
	}
	deps, err := c.deps()
	if err == nil {
		err = checkDeps(p, r.Prefix, deps)
	}
	rep.check(fmt.Sprintf("%s program: its build has %s and no other driver or test-only module",
		p.name, strings.Join(append(p.uses, p.drivers...), ", ")), err)
	if p.run {
		rep.check(p.name+" program runs", c.run())
	}
}
