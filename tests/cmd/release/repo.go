package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// modulePrefix is the path of every module of the repository, followed by
// its directory: github.com/distlock/distlock/redislock lives in redislock/.
const modulePrefix = "github.com/distlock/distlock/"

// unpublished are the modules of go.work that are never tagged. No program
// imports them: examples are programs to run from a clone, and tests holds
// the repository's cross-module tests and tools.
var unpublished = map[string]bool{"examples": true, "tests": true}

// A repoModule is one module of go.work.
type repoModule struct {
	Dir       string // relative to the repository root, slash-separated: "redislock"
	Path      string // the module path
	Published bool   // tagged at a release (not in unpublished)
	File      *modfile.File
}

// A repo is the repository's modules, in go.work's order.
type repo struct {
	Root    string // absolute
	Prefix  string // modulePrefix, or another one in tests
	Modules []*repoModule
	Work    *modfile.WorkFile
}

// loadRepo reads root/go.work and the go.mod of each module it uses.
func loadRepo(root, prefix string) (*repo, error) {
	workPath := filepath.Join(root, "go.work")
	data, err := os.ReadFile(workPath)
	if err != nil {
		return nil, err
	}
	work, err := modfile.ParseWork(workPath, data, nil)
	if err != nil {
		return nil, err
	}
	r := &repo{Root: root, Prefix: prefix, Work: work}
	for _, use := range work.Use {
		dir := strings.TrimPrefix(filepath.ToSlash(filepath.Clean(use.Path)), "./")
		m, err := loadModule(root, dir)
		if err != nil {
			return nil, err
		}
		m.Published = !unpublished[dir]
		r.Modules = append(r.Modules, m)
	}
	if len(r.Modules) == 0 {
		return nil, fmt.Errorf("%s uses no module", workPath)
	}
	return r, nil
}

func loadModule(root, dir string) (*repoModule, error) {
	path := filepath.Join(root, filepath.FromSlash(dir), "go.mod")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		return nil, err
	}
	if f.Module == nil {
		return nil, fmt.Errorf("%s: no module directive", path)
	}
	return &repoModule{Dir: dir, Path: f.Module.Mod.Path, File: f}, nil
}

// byPath returns the module of the repository with that path, or nil.
func (r *repo) byPath(path string) *repoModule {
	for _, m := range r.Modules {
		if m.Path == path {
			return m
		}
	}
	return nil
}

// published returns the modules that a release tags.
func (r *repo) published() []*repoModule {
	var ms []*repoModule
	for _, m := range r.Modules {
		if m.Published {
			ms = append(ms, m)
		}
	}
	return ms
}

// ours reports whether modPath is the path of a module of the repository
// with that prefix: the prefix without its slash (the module at the
// repository root) or a path under it.
func ours(prefix, modPath string) bool {
	return modPath == strings.TrimSuffix(prefix, "/") || strings.HasPrefix(modPath, prefix)
}

func (r *repo) ours(modPath string) bool { return ours(r.Prefix, modPath) }

// siblingRequires returns m's requirements of modules of the repository
// (by path prefix, so a typo in a sibling's name is caught as well).
func (r *repo) siblingRequires(m *repoModule) []*modfile.Require {
	var reqs []*modfile.Require
	for _, req := range m.File.Require {
		if r.ours(req.Mod.Path) {
			reqs = append(reqs, req)
		}
	}
	return reqs
}

// goEnv returns os.Environ with each of set's keys set to its value.
func goEnv(set map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			env = append(env, kv)
		}
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return env
}
