package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The database drivers the backends wrap: a program that uses one backend
// must not pull in another backend's driver.
const (
	goRedis = "github.com/redis/go-redis/v9"
	pgx     = "github.com/jackc/pgx/v5"
	nats    = "github.com/nats-io/nats.go"
)

var drivers = []string{goRedis, pgx, nats}

// testOnly are modules that only the modules' tests import: a program must
// not pull them in.
var testOnly = []string{"github.com/stretchr/testify", "go.uber.org/goleak", "github.com/testcontainers/testcontainers-go"}

// A program is one of the programs in programs/<name>, built in a consumer
// module outside the repository against the packed modules.
type program struct {
	name    string   // its directory under programs/, and in the consumer
	uses    []string // the directories of the distlock modules it imports
	drivers []string // the drivers it needs; it must not pull in the others
	run     bool     // it needs no server: the check runs it
}

var programs = []program{
	{name: "filelock", uses: []string{"core", "filelock"}, run: true},
	{name: "redislock", uses: []string{"core", "redislock"}, drivers: []string{goRedis}},
	{name: "redlock", uses: []string{"core", "redlock"}, drivers: []string{goRedis}},
	{name: "pglock", uses: []string{"core", "pglock"}, drivers: []string{pgx}},
	{name: "natslock", uses: []string{"core", "natslock"}, drivers: []string{nats}},
	{name: "election", uses: []string{"election", "filelock"}, run: true},
	{name: "polllease", uses: []string{"polllease", "filelock"}, run: true},
}

// checkDeps reports what p's build must not hold or lacks, given the
// modules of the packages it is built from (go list -deps).
func checkDeps(p program, prefix string, deps map[string]bool) error {
	var errs []error
	for _, dir := range p.uses {
		if !deps[prefix+dir] {
			errs = append(errs, fmt.Errorf("%s: does not build %s", p.name, prefix+dir))
		}
	}
	for _, d := range drivers {
		switch want := slices.Contains(p.drivers, d); {
		case want && !deps[d]:
			errs = append(errs, fmt.Errorf("%s: does not build its driver %s", p.name, d))
		case !want && deps[d]:
			errs = append(errs, fmt.Errorf("%s: pulls in another backend's driver %s", p.name, d))
		}
	}
	for _, t := range testOnly {
		if deps[t] {
			errs = append(errs, fmt.Errorf("%s: pulls in the test-only module %s", p.name, t))
		}
	}
	return errors.Join(errs...)
}

// A consumer is a module outside the repository (GOWORK=off) whose go
// command finds the distlock modules in a file:// proxy first and verifies
// every other module against the checksum database as usual. It holds at
// most one program, in its root directory.
type consumer struct {
	dir string
	env []string
}

// fallbackProxies returns where a consumer finds the modules that are not
// ours: the caller's module cache, which is laid out as a proxy too (to
// spare downloads), then the caller's GOPROXY.
func fallbackProxies() ([]string, error) {
	out, err := exec.Command("go", "env", "GOPROXY", "GOMODCACHE").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		return nil, fmt.Errorf("go env GOPROXY GOMODCACHE printed %q", out)
	}
	var chain []string
	if cache := filepath.Join(lines[1], "cache", "download"); lines[1] != "" && isDir(cache) {
		chain = append(chain, fileURL(cache))
	}
	return append(chain, lines[0]), nil
}

// newConsumer makes a consumer module in dir that reads modules from
// proxyDir first, then from the proxies of fallback. modcache, its module
// cache, must be new to this run, so that no earlier run's copy of one of
// our modules stands in for the one just packed.
func newConsumer(dir, proxyDir, modcache, prefix string, fallback []string) (*consumer, error) {
	c := &consumer{dir: dir, env: consumerEnv(proxyDir, modcache, prefix, fallback)}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := c.goCmd("mod", "init", "example.com/distlock-consumer"); err != nil {
		return nil, err
	}
	return c, nil
}

// consumerEnv is the environment of the go command outside the workspace
// that finds our modules in proxyDir, then the others in the proxies of
// fallback, with the module cache modcache.
func consumerEnv(proxyDir, modcache, prefix string, fallback []string) []string {
	chain := append([]string{fileURL(proxyDir)}, fallback...)
	mod := strings.TrimSuffix(prefix, "/")
	return goEnv(map[string]string{
		"GOWORK":              "off",
		"GOFLAGS":             "-mod=mod -modcacherw -trimpath", // -trimpath: the build cache serves every run, whatever its GOMODCACHE
		"GOPROXY":             strings.Join(chain, ","),
		"GONOSUMDB":           mod,          // the packed zips are not the published ones: no checksum database vouches for them
		"GOPRIVATE":           "",           // a private path would skip the proxy
		"GONOPROXY":           "",           // likewise
		"GOVCS":               mod + ":off", // never fetch ours from their repository
		"GOMODCACHE":          modcache,
		"GOTOOLCHAIN":         "local",
		"GIT_TERMINAL_PROMPT": "0",
	})
}

func fileURL(dir string) string { return "file://" + filepath.ToSlash(dir) }

func isDir(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

// goCmd runs the go command in the consumer and returns its standard
// output; an error carries its standard error.
func (c *consumer) goCmd(args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = c.dir
	cmd.Env = c.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, indent(stderr.Bytes()))
	}
	return out, nil
}

// versions returns the version of each module of the consumer's build list.
func (c *consumer) versions() (map[string]string, error) {
	out, err := c.goCmd("list", "-m", "-f", "{{.Path}} {{.Version}}", "all")
	if err != nil {
		return nil, err
	}
	vs := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if p, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			vs[p] = v
		}
	}
	return vs, nil
}

// checkBuildList reports a module of the consumer's build list, with path
// prefix (or the module at the repository root, prefix without its slash),
// at another version than version.
func (c *consumer) checkBuildList(prefix, version string) error {
	vs, err := c.versions()
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range sortedKeys(vs) {
		if ours(prefix, p) && vs[p] != version {
			errs = append(errs, fmt.Errorf("%s is at %s", p, vs[p]))
		}
	}
	return errors.Join(errs...)
}

// build copies the program src (a main.go) into the consumer and builds it.
func (c *consumer) build(src string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.dir, "main.go"), data, 0o644); err != nil {
		return err
	}
	_, err = c.goCmd("build", "-o", filepath.Join(c.dir, "program"), ".")
	return err
}

// deps returns the modules of the packages the program is built from.
func (c *consumer) deps() (map[string]bool, error) {
	out, err := c.goCmd("list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", ".")
	if err != nil {
		return nil, err
	}
	deps := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		if line = strings.TrimSpace(line); line != "" {
			deps[line] = true
		}
	}
	return deps, nil
}

// run runs the built program, which must succeed within a minute.
func (c *consumer) run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.dir, "program"))
	cmd.Dir = c.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v\n%s", err, indent(out))
	}
	return nil
}
