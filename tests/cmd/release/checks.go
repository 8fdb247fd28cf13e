package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// checkVersion reports whether version can be a release of the modules: a
// canonical semantic version (no pseudo-version) of major version 0 or 1,
// since a v2 would change every module path.
func checkVersion(version string) error {
	switch {
	case !semver.IsValid(version) || semver.Canonical(version) != version:
		return fmt.Errorf("%q is not a canonical semantic version such as v0.2.0", version)
	case module.IsPseudoVersion(version):
		return fmt.Errorf("%s is a pseudo-version, not a release", version)
	case semver.Major(version) != "v0" && semver.Major(version) != "v1":
		return fmt.Errorf("%s needs a /%s suffix on every module path first", version, semver.Major(version))
	}
	return nil
}

// releaseVersion returns the version at which the modules require each
// other, which is the version a release tags: every sibling requirement must
// name it. When they disagree, it still returns the highest release version
// among them (so the later checks can run) along with the error.
func releaseVersion(r *repo) (string, error) {
	var errs []error
	seen := map[string][]string{} // version -> "module requires sibling"
	for _, m := range r.Modules {
		for _, req := range r.siblingRequires(m) {
			what := fmt.Sprintf("%s requires %s %s", m.Dir, strings.TrimPrefix(req.Mod.Path, r.Prefix), req.Mod.Version)
			if err := checkVersion(req.Mod.Version); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", what, err))
				continue
			}
			seen[req.Mod.Version] = append(seen[req.Mod.Version], what)
		}
	}
	if len(seen) == 0 {
		errs = append(errs, errors.New("no module requires a sibling at a release version: the release version is unknown"))
		return "", errors.Join(errs...)
	}
	versions := make([]string, 0, len(seen))
	for v := range seen {
		versions = append(versions, v)
	}
	semver.Sort(versions)
	if len(versions) > 1 {
		var parts []string
		for _, v := range versions {
			parts = append(parts, strings.Join(seen[v], ", "))
		}
		errs = append(errs, fmt.Errorf("siblings are required at %d versions: %s", len(versions), strings.Join(parts, "; ")))
	}
	return versions[len(versions)-1], errors.Join(errs...)
}

// checkSiblings reports a requirement of a module that is not in go.work or
// not published (a user could not get it), and one without a replace
// directive to the sibling's directory (without it, work inside the
// repository would build the published version instead of the working
// tree). A command module is the exception: go.work replaces its siblings
// instead (see isCommand), and checkCommand checks that.
func checkSiblings(r *repo) error {
	var errs []error
	for _, m := range r.Modules {
		if isCommand(m.Dir) {
			errs = append(errs, checkCommand(r, m))
		}
		for _, req := range r.siblingRequires(m) {
			dep := r.byPath(req.Mod.Path)
			switch {
			case dep == nil:
				errs = append(errs, fmt.Errorf("%s requires %s, which is not a module of go.work", m.Dir, req.Mod.Path))
				continue
			case m.Published && !dep.Published:
				errs = append(errs, fmt.Errorf("%s requires %s, which is never published", m.Dir, dep.Dir))
			}
			if want := relDir(m.Dir, dep.Dir); !isCommand(m.Dir) && !hasReplace(m, req.Mod.Path, want) {
				errs = append(errs, fmt.Errorf("%s/go.mod: want replace %s => %s", m.Dir, req.Mod.Path, want))
			}
		}
	}
	return errors.Join(errs...)
}

// relDir is the slash-separated path of dir relative to from, both relative
// to the repository root.
func relDir(from, dir string) string {
	rel, err := filepath.Rel(filepath.FromSlash(from), filepath.FromSlash(dir))
	if err != nil {
		return path.Join("..", dir)
	}
	return filepath.ToSlash(rel)
}

func hasReplace(m *repoModule, modPath, dir string) bool {
	for _, rep := range m.File.Replace {
		if rep.Old.Path == modPath && rep.Old.Version == "" &&
			path.Clean(rep.New.Path) == path.Clean(dir) && rep.New.Version == "" {
			return true
		}
	}
	return false
}

// checkOneVersion reports every dependency that two modules require at
// different versions, direct or indirect: in the workspace the tests run
// against the highest of them, so a module that names a lower one declares
// a version it is not tested with.
func checkOneVersion(r *repo) error {
	users := map[string]map[string][]string{} // path -> version -> module dirs
	for _, m := range r.Modules {
		for _, req := range m.File.Require {
			if r.ours(req.Mod.Path) {
				continue // releaseVersion's business
			}
			if users[req.Mod.Path] == nil {
				users[req.Mod.Path] = map[string][]string{}
			}
			users[req.Mod.Path][req.Mod.Version] = append(users[req.Mod.Path][req.Mod.Version], m.Dir)
		}
	}
	var errs []error
	for _, p := range sortedKeys(users) {
		if len(users[p]) < 2 {
			continue
		}
		versions := sortedKeys(users[p])
		semver.Sort(versions)
		var parts []string
		for _, v := range versions {
			parts = append(parts, fmt.Sprintf("%s (%s)", v, strings.Join(users[p][v], ", ")))
		}
		errs = append(errs, fmt.Errorf("%s is required at %s", p, strings.Join(parts, ", ")))
	}
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkChangelog reports a CHANGELOG.md without a "## [version]" heading.
func checkChangelog(root, version string) error {
	data, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		return err
	}
	heading := regexp.MustCompile(`(?m)^## \[?` + regexp.QuoteMeta(version) + `\]?(\s|$)`)
	if !heading.Match(data) {
		return fmt.Errorf("CHANGELOG.md has no \"## [%s]\" heading", version)
	}
	return nil
}

// checkTidy runs go mod tidy -diff in each module but the commands, outside
// the workspace as a user's build sees it, and reports the modules it would
// change. A command needs its siblings at the release version, which only
// the packed proxy has: checkCommandTidy checks it there.
func checkTidy(r *repo) error {
	var errs []error
	for _, m := range r.Modules {
		if isCommand(m.Dir) {
			continue
		}
		cmd := exec.Command("go", "mod", "tidy", "-diff")
		cmd.Dir = filepath.Join(r.Root, filepath.FromSlash(m.Dir))
		cmd.Env = goEnv(map[string]string{"GOWORK": "off"})
		if out, err := cmd.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%s: go mod tidy -diff: %v\n%s", m.Dir, err, indent(out)))
		}
	}
	return errors.Join(errs...)
}

// indent indents each line of out, for output nested under a check.
func indent(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	lines = slices.DeleteFunc(lines, func(s string) bool { return s == "" })
	return "    " + strings.Join(lines, "\n    ")
}
