package redisop

import (
	"context"
	"embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

// The Lua scripts behind every operation, one round trip each. Each is the
// functions of scripts/lib.lua it uses followed by the script's own file. Client runs them; they
// are loaded once per server and then called by SHA (EVALSHA, falling back to
// EVAL after a script cache flush).
var (
	scriptMutexAcquire   = load("mutex_acquire")
	scriptMutexRelease   = load("mutex_release")
	scriptWriteAcquire   = load("write_acquire")
	scriptReadAcquire    = load("read_acquire")
	scriptSemAcquire     = load("sem_acquire")
	scriptKeyExtend      = load("key_extend")
	scriptKeyRelease     = load("key_release")
	scriptZsetExtend     = load("zset_extend")
	scriptZsetRelease    = load("zset_release")
	scriptWithdraw       = load("withdraw")
	scriptMemberRegister = load("member_register")
	scriptMemberList     = load("member_list")
	scriptHeartbeat      = load("member_heartbeat")
	scriptMemberAnnounce = load("member_announce")
	scriptDeregister     = load("member_deregister")
	scriptMutexSpare     = load("mutex_spare")
)

// script is a Lua script with its source, for calls that build their own
// command (Client.call).
type script struct {
	*redis.Script
	src string
}

func load(name string) script {
	lib, err := scriptFS.ReadFile("scripts/lib.lua")
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	body, err := scriptFS.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	src := libFor(string(lib), string(body)) + string(body)
	return script{Script: redis.NewScript(src), src: src}
}

// head returns the start of an EVALSHA of s on keys, boxed once, for a
// Lock that serves many calls (Client.call).
func (s script) head(keys []string) []any {
	h := make([]any, 3+len(keys))
	h[0], h[1], h[2] = "evalsha", s.Hash(), len(keys)
	for i, k := range keys {
		h[3+i] = k
	}
	return h
}

// call runs s with a command head made by s.head and args: what
// redis.Script.Run does, without boxing the script's name, hash and keys
// again on every call. A server that does not know the script (its cache
// was flushed, or it restarted) gets it by source.
func (c *Client) call(ctx context.Context, s script, head []any, args ...any) *redis.Cmd {
	a := make([]any, len(head), len(head)+len(args))
	copy(a, head)
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	cmd.SetFirstKeyPos(3)
	_ = c.rdb.Process(ctx, cmd)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		a[0], a[1] = "eval", s.src
		cmd = redis.NewCmd(ctx, a...)
		cmd.SetFirstKeyPos(3)
		_ = c.rdb.Process(ctx, cmd)
	}
	return cmd
}

// libFor returns the functions of lib that body uses, directly or through
// each other, in lib's order: every function is code the server runs on
// each call.
func libFor(lib, body string) string {
	type fn struct{ name, src string }
	var fns []fn
	for _, chunk := range strings.Split(lib, "\n\n") {
		i := strings.Index(chunk, "local function ")
		if i < 0 {
			continue
		}
		rest := chunk[i+len("local function "):]
		fns = append(fns, fn{name: rest[:strings.IndexByte(rest, '(')], src: chunk})
	}
	need := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for _, f := range fns {
			if need[f.name] {
				continue
			}
			uses := strings.Contains(body, f.name+"(")
			for _, g := range fns {
				if need[g.name] && strings.Contains(g.src, f.name+"(") {
					uses = true
				}
			}
			if uses {
				need[f.name], changed = true, true
			}
		}
	}
	var b strings.Builder
	for _, f := range fns {
		if need[f.name] {
			b.WriteString(f.src)
			b.WriteString("\n\n")
		}
	}
	return b.String()
}
