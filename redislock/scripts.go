package redislock

import (
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
	scriptMutexSpare     = load("mutex_spare")
)

func load(name string) *redis.Script {
	lib, err := scriptFS.ReadFile("scripts/lib.lua")
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	body, err := scriptFS.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(libFor(string(lib), string(body)) + string(body))
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
