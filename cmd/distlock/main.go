package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Exit statuses of distlock itself; see the package documentation.
const (
	exitError     = 1
	exitUsage     = 2
	exitBusy      = 75
	exitLost      = 76
	exitCannotRun = 126
	exitNotFound  = 127
)

func main() {
	os.Exit(runCLI(os.Args[1:], os.Stdout, os.Stderr))
}

// cli is one invocation: where it writes and logs.
type cli struct {
	stdout, stderr io.Writer
	log            *slog.Logger // to stderr with -v, else silent
}

const usage = `distlock takes distributed locks from the shell.

Usage:
  distlock run [-wait D] [-ttl D] [-shared] [-semaphore N] [-grace D] [-v] URL NAME -- CMD [ARGS...]
  distlock leader [-id ID] [-grace D] [-v] URL GROUP -- CMD [ARGS...]
  distlock holder [-v] URL NAME
  distlock members [-v] URL GROUP
  distlock version

URL names the backend: file:///var/lock/app, redis://host:6379/0,
redis+cluster://h1:p1,h2:p2, redlock://h1:p1,h2:p2,h3:p3, postgres://...,
nats://host:4222; query parameters set options (?ttl=10s&identity=web-1).

Examples:
  # a cron job on many hosts: one runs it, the others skip this round
  distlock run -wait 0 redis://locks:6379 nightly-report -- ./report.sh
  # a singleton daemon: only the leader runs it; a follower takes over
  distlock leader 'redis://locks:6379/0?ttl=10s' ingest -- ./ingest --serve
  # who holds the lock
  distlock holder redis://locks:6379 nightly-report

Run "distlock <command> -h" for a command's flags. Exit statuses: 75 not
acquired within -wait, 76 lock lost while CMD ran, 2 usage, 1 backend
failure; otherwise CMD's own.
`

// runCLI runs the command args names and returns the exit status.
func runCLI(args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr, log: slog.New(slog.DiscardHandler)}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return c.run(args[1:])
	case "leader":
		return c.leader(args[1:])
	case "holder":
		return c.holder(args[1:])
	case "members":
		return c.members(args[1:])
	case "version":
		return c.version()
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "distlock: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// flags returns a command's flag set, with -v; synopsis and examples head
// its -h text.
func (c *cli) flags(name, synopsis, examples string) (*flag.FlagSet, *bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: distlock %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
		if examples != "" {
			fmt.Fprintf(fs.Output(), "\nExamples:\n%s", examples)
		}
	}
	return fs, fs.Bool("v", false, "log what distlock does to stderr")
}

// parse parses args into fs and returns the n positional arguments and,
// when withCmd, the command after them (an optional "--" between). It
// returns an exit status ≥ 0 when the caller should stop: -h, or a usage
// error already reported.
func (c *cli) parse(fs *flag.FlagSet, verbose *bool, args []string, n int, withCmd bool) (pos, argv []string, code int) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil, 0
		}
		return nil, nil, exitUsage
	}
	if *verbose {
		c.log = slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	rest := fs.Args()
	if len(rest) < n {
		return nil, nil, c.usageError(fs, "want %d arguments, got %d", n, len(rest))
	}
	pos, argv = rest[:n], rest[n:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	switch {
	case withCmd && len(argv) == 0:
		return nil, nil, c.usageError(fs, "no command to run after --")
	case !withCmd && len(argv) > 0:
		return nil, nil, c.usageError(fs, "unexpected arguments %q", argv)
	}
	return pos, argv, -1
}

func (c *cli) usageError(fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(c.stderr, "distlock %s: %s\n\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return exitUsage
}

// fail reports err on one line and returns its exit status: usage for bad
// input, error otherwise.
func (c *cli) fail(err error) int {
	fmt.Fprintf(c.stderr, "distlock: %v\n", err)
	if errors.Is(err, core.ErrInvalidArgument) || errors.Is(err, core.ErrInvalidName) {
		return exitUsage
	}
	return exitError
}

// open opens the backend rawURL names.
func (c *cli) open(ctx context.Context, rawURL string) (distlock.Provider, error) {
	p, err := distlock.Open(ctx, rawURL)
	if err == nil {
		u, _ := kit.ParseURL(rawURL) // parsed by Open already
		c.log.Debug("opened", "url", u.String())
	}
	return p, err
}

// withParam adds the query parameter key=value to rawURL.
func withParam(rawURL, key, value string) string {
	sep := "?"
	if strings.Contains(rawURL, "?") {
		sep = "&"
	}
	return rawURL + sep + key + "=" + value
}

func (c *cli) version() int {
	v := "(unknown)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		v = bi.Main.Version + " " + bi.GoVersion
	}
	fmt.Fprintln(c.stdout, "distlock", v)
	return 0
}
