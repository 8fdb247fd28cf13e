package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/locktest"
	"github.com/distlock/distlock/natslock"
	"github.com/distlock/distlock/pglock"
	"github.com/distlock/distlock/polllease"
	"github.com/distlock/distlock/polllease/pollleasetest"
	"github.com/distlock/distlock/redislock"
)

// plRecipes returns the inspection recipes of polllease's README, by the
// name of the marker before each ("<!-- inspect:redis -->" and a sh block).
func plRecipes(t *testing.T) map[string]string {
	raw, err := os.ReadFile(filepath.Join("..", "polllease", "README.md"))
	require.NoError(t, err)
	re := regexp.MustCompile("(?s)<!-- inspect:([a-z]+) -->\n```sh\n(.*?)```")
	out := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(raw), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// plInspected runs one instance that holds target, with the given Provider
// identity, and returns its lease's token once it polls.
func plInspected(t *testing.T, p core.Provider, m core.Membership, group, id, target string) uint64 {
	t.Helper()
	cfg := plConfig(p, m, group, id, func(context.Context) ([]string, error) { return []string{target}, nil },
		func(context.Context, string, uint64) error { return nil }, nil)
	c, err := polllease.New(cfg)
	require.NoError(t, err)
	stop := pollleasetest.Run(c.Run)
	t.Cleanup(func() { assert.NoError(t, stop()) })
	plWaitFor(t, "the target held", plWait, func() bool { return c.IsOwned(target) })
	return c.State(target).Token
}

// plRunRecipe runs a recipe with bash, GROUP, TARGET and env set, after
// prelude, and returns its output.
func plRunRecipe(t *testing.T, recipe, prelude, group, target string, env ...string) string {
	t.Helper()
	locktest.RequireBinary(t, "bash")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", prelude+recipe)
	cmd.Env = append(os.Environ(), append(env, "GROUP="+group, "TARGET="+target)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "recipe failed:\n%s", out)
	t.Logf("recipe output:\n%s", out)
	return string(out)
}

// TestPollLeaseInspection runs the inspection recipes of polllease's README
// against real servers while an instance holds a target, and checks that
// each names the live instance and the holder (and its token, where the
// store keeps it), so that the recipes cannot drift from what the backends
// write.
func TestPollLeaseInspection(t *testing.T) {
	t.Parallel() // own servers or names; waits on events only
	recipes := plRecipes(t)
	for _, name := range []string{"redis", "postgres", "nats"} {
		require.Contains(t, recipes, name, "README recipe")
	}
	const target = "endpoint-7"
	group := fmt.Sprintf("pl-inspect-%08x", rand.Uint32())
	t.Run("redis", func(t *testing.T) {
		addr := plRedisAddr(t)
		locktest.RequireBinary(t, "redis-cli")
		id := "inspect-redis"
		p, _, closeP := plProviderTTL(t, addr, plTTL, plRenew, redislock.WithIdentity(id))
		t.Cleanup(closeP)
		token := plInspected(t, p, p, group, id, target)
		out := plRunRecipe(t, recipes["redis"], "", group, target, "REDIS_URL=redis://"+addr)
		assert.Regexp(t, `(?m)^`+id+`\n\d+$`, out, "the live instance and its expiry")
		assert.Contains(t, out, fmt.Sprintf(" holder=%s token=%d pttl=", id, token))
	})
	t.Run("postgres", func(t *testing.T) {
		url := locktest.RequireEnv(t, "DISTLOCK_PG_URL")
		locktest.RequireBinary(t, "psql")
		for _, fenceTable := range []bool{false, true} {
			t.Run(fmt.Sprintf("fence table %v", fenceTable), func(t *testing.T) {
				plInspectPostgres(t, recipes["postgres"], url, group, target, fenceTable)
			})
		}
	})
	t.Run("nats", func(t *testing.T) {
		plInspectNATS(t, recipes["nats"], group, target)
	})
}

func plInspectPostgres(t *testing.T, recipe, url, group, target string, fenceTable bool) {
	id := fmt.Sprintf("inspect-pg-%v", fenceTable)
	group = fmt.Sprintf("%s-%v", group, fenceTable)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["application_name"] = id
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	opts := []pglock.Option{pglock.WithKeepalive(500 * time.Millisecond), pglock.WithIdentity(id)}
	if fenceTable {
		opts = append(opts, pglock.WithFenceTable(pglock.DefaultFenceTable))
	}
	p, err := pglock.New(pool, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	token := plInspected(t, p, p, group, id, target)
	out := plRunRecipe(t, recipe, "", group, target, "PG_URL="+url)
	assert.Regexp(t, `(?m)^`+id+`\|\d{4}-\d\d-\d\d `, out, "the live instance and its expiry")
	assert.Regexp(t, `(?m)^`+id+`\|127\.0\.0\.1\|\d+\|`, out, "the session that holds the lease")
	if fenceTable {
		assert.Regexp(t, fmt.Sprintf(`(?m)^%s\|%d$`, id, token), out, "the fence row: holder and token")
	}
}

// plInspectNATS runs the natslock recipe with the nats CLI when it is
// installed. Without it, the recipe runs with a shell function in the CLI's
// place that answers "kv ls" and "kv get" from the buckets as read through
// nats.go just before: the recipe's bucket and key names are still the ones
// checked.
func plInspectNATS(t *testing.T, recipe, group, target string) {
	url := locktest.RequireEnv(t, "DISTLOCK_NATS_URL")
	id := "inspect-nats"
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	// The buckets the recipe names, with natslock's defaults (TTL
	// included: a bucket keeps the TTL it was made with).
	p, err := natslock.New(js, natslock.WithIdentity(id))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	token := plInspected(t, p, p, group, id, target)

	prelude := ""
	if _, err := exec.LookPath("nats"); err != nil {
		t.Log("no nats CLI: the recipe's nats calls are answered from the buckets as read through nats.go")
		prelude = plNATSShim(t, js, "distlock", "distlock_members")
	}
	out := plRunRecipe(t, recipe, prelude, group, target, "NATS_URL="+url)
	// A member's key is kit.SafeName(group) + "." + kit.SafeName(id).
	assert.Contains(t, out, "."+strings.ReplaceAll(id, "-", "_")+"-", "the live instance's key")
	assert.Contains(t, out, `"id":"`+id+`"`, "the holder")
	assert.Regexp(t, fmt.Sprintf(`"token":%d\b|revision: %d\b`, token, token), out, "the token")
}

// plNATSShim reads every key of buckets through nats.go into files, and
// returns a bash function named nats that answers "kv ls BUCKET" and
// "kv get BUCKET KEY" from them, as the CLI prints them.
func plNATSShim(t *testing.T, js jetstream.JetStream, buckets ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	for _, b := range buckets {
		kv, err := js.KeyValue(ctx, b)
		require.NoError(t, err, "bucket %s", b)
		keys, err := kv.ListKeys(ctx)
		require.NoError(t, err)
		var names []string
		require.NoError(t, os.MkdirAll(filepath.Join(dir, b), 0o755))
		for k := range keys.Keys() {
			e, err := kv.Get(ctx, k)
			if err != nil {
				continue // expired or deleted since the listing
			}
			names = append(names, k)
			got := fmt.Sprintf("%s > %s revision: %d created @ %s\n\n%s\n", b, k, e.Revision(), e.Created().Format(time.RFC1123), e.Value())
			require.NoError(t, os.WriteFile(filepath.Join(dir, b, k), []byte(got), 0o644))
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, b+".keys"), []byte(strings.Join(names, "\n")+"\n"), 0o644))
	}
	return `nats() {
  while [ "$1" = --server ]; do shift 2; done
  case "$1 $2" in
    "kv ls") cat ` + strconv.Quote(dir) + `/"$3".keys ;;
    "kv get") cat ` + strconv.Quote(dir) + `/"$3"/"$4" ;;
    *) echo "nats: $* is not answered here" >&2; return 1 ;;
  esac
}
`
}
