package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/distlock/distlock/core"
)

const holderExamples = `  distlock holder redis://locks:6379 nightly-report
  distlock holder 'postgres://app@db/app?fence_table=distlock_fence' migrate
`

// holder prints who holds the mutex NAME.
func (c *cli) holder(args []string) int {
	fs, verbose := c.flags("holder", "holder [-v] URL NAME", holderExamples)
	pos, _, code := c.parse(fs, verbose, args, 2, false)
	if code >= 0 {
		return code
	}
	rawURL, name := pos[0], pos[1]
	ctx := context.Background()
	p, err := c.open(ctx, rawURL)
	if err != nil {
		return c.fail(err)
	}
	defer p.Close()
	insp, ok := p.Mutex(name).(core.Inspector)
	if !ok {
		fmt.Fprintf(c.stderr, "distlock: %s cannot tell who holds a lock%s\n", scheme(rawURL), inspectHint(rawURL))
		return exitError
	}
	who, held, err := insp.Holder(ctx)
	switch {
	case err != nil:
		return c.fail(err)
	case !held:
		fmt.Fprintf(c.stdout, "%s is free\n", name)
	default:
		fmt.Fprintf(c.stdout, "%s is held by %s (token %d)\n", name, who.ID, who.Token)
	}
	return 0
}

// inspectHint says how to make a backend that cannot inspect able to.
func inspectHint(rawURL string) string {
	if s := scheme(rawURL); s == "postgres://" || s == "postgresql://" {
		return " without a fence table: add ?fence_table=distlock_fence, in every process that takes the lock"
	}
	return ""
}

func scheme(rawURL string) string {
	s, _, _ := strings.Cut(rawURL, "://")
	return strings.ToLower(s) + "://"
}

// members prints the live members of GROUP, one a line.
func (c *cli) members(args []string) int {
	fs, verbose := c.flags("members", "members [-v] URL GROUP", "  distlock members redis://locks:6379/0 ingest\n")
	pos, _, code := c.parse(fs, verbose, args, 2, false)
	if code >= 0 {
		return code
	}
	ctx := context.Background()
	p, err := c.open(ctx, pos[0])
	if err != nil {
		return c.fail(err)
	}
	defer p.Close()
	m, ok := p.(core.Membership)
	if !ok {
		fmt.Fprintf(c.stderr, "distlock: %s keeps no members\n", scheme(pos[0]))
		return exitError
	}
	ids, err := m.Members(ctx, pos[1])
	if err != nil {
		return c.fail(err)
	}
	for _, id := range ids {
		fmt.Fprintln(c.stdout, id)
	}
	return 0
}
