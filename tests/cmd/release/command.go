package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
)

// A module under cmd/ is a command: users install it with
//
//	go install <module path>@<version>
//
// which the go command refuses for a module whose go.mod has a replace
// directive. So a command requires its siblings at the release version
// without replacing them, and go.work replaces each of those requirements
// (at that version) with the sibling's directory, for work inside the
// repository. Outside the workspace a command builds only against the
// siblings' published versions, so its go.sum cannot hold their sums
// before the tag (the checksum database vouches for them after it), and
// its go mod tidy runs against the packed modules of a throwaway proxy:
// `go run ./tests/cmd/release tidy`. Each command answers "NAME version"
// with a line that starts with its name and version.
func isCommand(dir string) bool { return strings.HasPrefix(dir, "cmd/") }

// commands returns the command modules of r.
func (r *repo) commands() []*repoModule {
	var ms []*repoModule
	for _, m := range r.Modules {
		if isCommand(m.Dir) {
			ms = append(ms, m)
		}
	}
	return ms
}

// checkCommand reports a replace directive in the command module m, and a
// sibling requirement of m that go.work does not replace, at the version
// required, with the sibling's directory.
func checkCommand(r *repo, m *repoModule) error {
	var errs []error
	for _, rep := range m.File.Replace {
		errs = append(errs, fmt.Errorf("%s/go.mod: replace %s: a command has no replace directive (go install %s@VERSION refuses one); go.work replaces its siblings",
			m.Dir, rep.Old.Path, m.Path))
	}
	for _, req := range r.siblingRequires(m) {
		dep := r.byPath(req.Mod.Path)
		if dep == nil {
			continue // checkSiblings reports it
		}
		if !workReplaces(r, req.Mod.Path, req.Mod.Version, dep.Dir) {
			errs = append(errs, fmt.Errorf("go.work: want replace %s %s => %s (%s requires it)",
				req.Mod.Path, req.Mod.Version, workDir(dep.Dir), m.Dir))
		}
	}
	return errors.Join(errs...)
}

// workReplaces reports whether go.work replaces modPath at version with
// dir (relative to the repository root).
func workReplaces(r *repo, modPath, version, dir string) bool {
	for _, rep := range r.Work.Replace {
		if rep.Old.Path == modPath && rep.Old.Version == version &&
			path.Clean(rep.New.Path) == path.Clean(dir) && rep.New.Version == "" {
			return true
		}
	}
	return false
}

// workDir is dir as go.work names a directory: "./core", "./".
func workDir(dir string) string {
	if dir == "." {
		return "./"
	}
	return "./" + dir
}

// bumpWork sets every versioned replace of one of r's modules in go.work
// to version, in place.
func bumpWork(r *repo, version string) error {
	changed := false
	for _, rep := range r.Work.Replace {
		if !r.ours(rep.Old.Path) || rep.Old.Version == "" || rep.Old.Version == version {
			continue
		}
		// The tokens: [replace] path version => dir; no module path is a version.
		tok := rep.Syntax.Token
		for i := range tok {
			if tok[i] == rep.Old.Version {
				tok[i], changed = version, true
				break
			}
		}
	}
	if !changed {
		return nil
	}
	return os.WriteFile(filepath.Join(r.Root, "go.work"), modfile.Format(r.Work.Syntax), 0o644)
}

// tidyEnv is the environment of a go mod tidy of a command module outside
// the workspace, which finds its siblings in proxyDir.
func tidyEnv(proxyDir, modcache, prefix string, fallback []string) []string {
	env := consumerEnv(proxyDir, modcache, prefix, fallback)
	return append(env, "GOFLAGS=-modcacherw")
}

// checkCommandTidy runs go mod tidy -diff in the command module m outside
// the workspace, its siblings found in proxyDir, and reports any change
// but the sums of the siblings, which go.sum leaves out.
func checkCommandTidy(r *repo, m *repoModule, proxyDir, modcache string, fallback []string) error {
	cmd := exec.Command("go", "mod", "tidy", "-diff")
	cmd.Dir = filepath.Join(r.Root, filepath.FromSlash(m.Dir))
	cmd.Env = tidyEnv(proxyDir, modcache, r.Prefix, fallback)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	diff, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || len(diff) == 0) {
		return fmt.Errorf("%s: go mod tidy -diff: %v\n%s", m.Dir, err, indent(stderr.Bytes()))
	}
	if err := siblingSumsOnly(diff, r); err != nil {
		return fmt.Errorf("%s: not tidy (run: go run ./tests/cmd/release tidy): %w", m.Dir, err)
	}
	return nil
}

// siblingSumsOnly reports the lines a unified diff of go.mod and go.sum
// changes, but lines of go.sum that it adds for one of r's modules.
func siblingSumsOnly(diff []byte, r *repo) error {
	var bad []string
	for line := range strings.Lines(string(diff)) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "+++ "), strings.HasPrefix(line, "--- "):
		case strings.HasPrefix(line, "+") && isSiblingSum(line[1:], r):
		case strings.HasPrefix(line, "+"), strings.HasPrefix(line, "-"):
			bad = append(bad, line)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("go mod tidy would change:\n%s", indent([]byte(strings.Join(bad, "\n"))))
	}
	return nil
}

// isSiblingSum reports whether line is a go.sum line of one of r's modules.
func isSiblingSum(line string, r *repo) bool {
	f := strings.Fields(line)
	return len(f) == 3 && r.ours(f[0]) && strings.HasPrefix(f[2], "h1:")
}

// tidy runs go mod tidy in every command module outside the workspace,
// against the published modules packed at the release version into a
// throwaway proxy, and removes the siblings' sums from its go.sum.
func tidy(root string, w io.Writer) error {
	r, err := loadRepo(root, modulePrefix)
	if err != nil {
		return err
	}
	version, err := releaseVersion(r)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "distlock-release-tidy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	proxyDir := filepath.Join(work, "proxy")
	if err := writeProxy(proxyDir, root, r.published(), version, time.Now()); err != nil {
		return err
	}
	fallback, err := fallbackProxies()
	if err != nil {
		return err
	}
	for _, m := range r.commands() {
		dir := filepath.Join(root, filepath.FromSlash(m.Dir))
		cmd := exec.Command("go", "mod", "tidy")
		cmd.Dir = dir
		cmd.Env = tidyEnv(proxyDir, filepath.Join(work, "modcache"), r.Prefix, fallback)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: go mod tidy: %v\n%s", m.Dir, err, indent(out))
		}
		if err := dropSiblingSums(filepath.Join(dir, "go.sum"), r); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: tidy against the modules at %s\n", m.Dir, version)
	}
	return nil
}

// dropSiblingSums removes the lines of r's modules from the go.sum file.
func dropSiblingSums(name string, r *repo) error {
	data, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var kept bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if !isSiblingSum(sc.Text(), r) {
			kept.WriteString(sc.Text() + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return os.WriteFile(name, kept.Bytes(), 0o644)
}

// install runs go install path@version in the consumer (outside the
// workspace, from the proxy) into a new GOBIN, without -mod=mod as a user
// runs it, then the installed command with "version", whose output must
// start with its name and version.
func (c *consumer) install(modPath, version string) error {
	gobin := filepath.Join(c.dir, "bin")
	cmd := exec.Command("go", "install", modPath+"@"+version)
	cmd.Dir = c.dir
	cmd.Env = append(c.env[:len(c.env):len(c.env)], "GOBIN="+gobin, "GOFLAGS=-modcacherw -trimpath")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go install %s@%s: %v\n%s", modPath, version, err, indent(out))
	}
	name := path.Base(modPath)
	out, err := exec.Command(filepath.Join(gobin, name), "version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s version: %v\n%s", name, err, indent(out))
	}
	if want := name + " " + version; !strings.HasPrefix(string(out), want) {
		return fmt.Errorf("%s version printed %q, want a line starting with %q", name, out, want)
	}
	return nil
}
