//go:build ignore

// gotestfilter turns `go test -json` output back into the familiar
// non-verbose `go test` output (package ok/FAIL lines, plus the full output of
// failing tests), and records every skipped test with its reason, so that
// scripts/test.sh can report skips: a backend test that skipped did not test
// anything.
//
// Usage: go test -json ./... 2>&1 | gotestfilter -skips FILE
//
// It is a stand-alone tool (stdlib only, built by scripts/test.sh with
// `go build scripts/gotestfilter.go`), not part of any distlock module.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (see `go doc test2json`).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output / build-fail events
}

type filter struct {
	out   io.Writer
	bufs  map[string][]string // per package+test output, until we know the result
	order map[string][]string // package -> test keys in start order
	skips []string
}

func key(pkg, test string) string { return pkg + "\x00" + test }

func (f *filter) handle(e event) {
	if e.Action == "build-output" {
		fmt.Fprint(f.out, e.Output)
		return
	}
	if e.Test == "" {
		f.packageEvent(e)
		return
	}
	k := key(e.Package, e.Test)
	switch e.Action {
	case "run":
		if _, ok := f.bufs[k]; !ok {
			f.order[e.Package] = append(f.order[e.Package], k)
		}
		f.bufs[k] = f.bufs[k][:0]
	case "output":
		if _, ok := f.bufs[k]; !ok {
			f.order[e.Package] = append(f.order[e.Package], k)
		}
		f.bufs[k] = append(f.bufs[k], e.Output)
	case "fail":
		f.flush(k)
	case "pass":
		delete(f.bufs, k)
	case "skip":
		f.skips = append(f.skips, fmt.Sprintf("%s %s: %s", e.Package, e.Test, skipReason(f.bufs[k])))
		delete(f.bufs, k)
	}
}

func (f *filter) packageEvent(e event) {
	switch e.Action {
	case "output":
		// A failing package: first show whatever its unfinished tests
		// printed (a panic or timeout never reports the test as failed).
		if e.Output == "FAIL\n" || strings.HasPrefix(e.Output, "FAIL\t") {
			f.flushPackage(e.Package)
		}
		// Verbose-only noise that plain `go test` does not print.
		if e.Output == "PASS\n" || strings.HasPrefix(e.Output, "=== ") {
			return
		}
		fmt.Fprint(f.out, e.Output)
	case "fail":
		f.flushPackage(e.Package)
	}
}

// flush prints a failed test's output, minus the verbose-mode markers.
func (f *filter) flush(k string) {
	for _, line := range f.bufs[k] {
		if strings.HasPrefix(strings.TrimLeft(line, " "), "=== ") {
			continue
		}
		fmt.Fprint(f.out, line)
	}
	delete(f.bufs, k)
}

func (f *filter) flushPackage(pkg string) {
	for _, k := range f.order[pkg] {
		if _, ok := f.bufs[k]; ok {
			f.flush(k)
		}
	}
	delete(f.order, pkg)
}

// skipReason is what the test logged, without the `--- SKIP` header.
func skipReason(lines []string) string {
	var parts []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		parts = append(parts, t)
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " | ")
}

func main() {
	skipsFile := flag.String("skips", "", "append skipped tests to this file, one per line")
	flag.Parse()

	f := &filter{out: os.Stdout, bufs: map[string][]string{}, order: map[string][]string{}}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1024*1024), 64*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// Not test2json: e.g. the go command's own errors on stderr.
			fmt.Fprintf(os.Stdout, "%s\n", line)
			continue
		}
		f.handle(e)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "gotestfilter:", err)
	}
	// Anything still buffered belongs to tests that never finished.
	pkgs := make([]string, 0, len(f.order))
	for p := range f.order {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		f.flushPackage(p)
	}

	if *skipsFile != "" && len(f.skips) > 0 {
		w, err := os.OpenFile(*skipsFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gotestfilter:", err)
			os.Exit(1)
		}
		for _, s := range f.skips {
			fmt.Fprintln(w, s)
		}
		w.Close()
	}
}
