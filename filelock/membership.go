package filelock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// membershipDir holds one directory per group, and beside it the group's
// lock file:
//
//	<dir>/membership/<group stem>.lock      serializes writers and readers
//	<dir>/membership/<group stem>/<id stem>.mem
//
// A member file holds the registration's expiry (Unix nanoseconds, by this
// host's clock) on its first line and the exact id after it.
const membershipDir = "membership"

var _ core.Membership = (*Provider)(nil)

// Register adds id to group, or refreshes it, for ttl: Members lists it
// until ttl has passed without another Register. It rewrites one small file
// under the group's lock. Errors match core.ErrInvalidName for an empty or
// invalid group or id, core.ErrInvalidArgument for ttl ≤ 0, a nil context
// or a directory that cannot hold files.
func (p *Provider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	if err := p.memberArgs(ctx, "register", group, id); err != nil {
		return err
	}
	if ttl <= 0 {
		return kit.Wrap(backend, "register", group, kit.Invalid("ttl %v must be positive", ttl))
	}
	expiry := p.now().Add(ttl).UnixNano()
	err := p.withGroup(ctx, group, false, func(dir string) error {
		content := append(strconv.AppendInt(nil, expiry, 10), '\n')
		content = append(content, id...)
		err := writeMember(memberPath(dir, id), content)
		if errors.Is(err, fs.ErrNotExist) {
			if err = os.MkdirAll(dir, dirPerm); err == nil {
				err = writeMember(memberPath(dir, id), content)
			}
		}
		return err
	})
	if err != nil {
		return kit.Wrap(backend, "register", group, fmt.Errorf("member %q: %w", id, err))
	}
	return nil
}

// Deregister removes id from group at once. Removing an absent id is not an
// error.
func (p *Provider) Deregister(ctx context.Context, group, id string) error {
	if err := p.memberArgs(ctx, "deregister", group, id); err != nil {
		return err
	}
	err := p.withGroup(ctx, group, false, func(dir string) error {
		err := os.Remove(memberPath(dir, id))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	})
	if err != nil {
		return kit.Wrap(backend, "deregister", group, fmt.Errorf("member %q: %w", id, err))
	}
	return nil
}

// Members lists the live ids of group, sorted: one read of the group's
// directory and of each member file, under the group's shared lock. Expired
// registrations are not listed; Members removes their files.
func (p *Provider) Members(ctx context.Context, group string) ([]string, error) {
	if err := p.memberArgs(ctx, "members", group); err != nil {
		return nil, err
	}
	var live, expired []string
	err := p.withGroup(ctx, group, true, func(dir string) error {
		var err error
		live, expired, err = readMembers(dir, p.now())
		return err
	})
	if err == nil && len(expired) > 0 {
		// Sweep under the exclusive lock, checking again: the member may
		// have registered since.
		err = p.withGroup(ctx, group, false, func(dir string) error {
			_, expired, err := readMembers(dir, p.now())
			for _, path := range expired {
				if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
					err = errors.Join(err, rerr)
				}
			}
			return err
		})
	}
	if err != nil {
		return nil, kit.Wrap(backend, "members", group, err)
	}
	return live, nil
}

func (p *Provider) memberArgs(ctx context.Context, op, group string, ids ...string) error {
	if ctx == nil {
		return kit.Wrap(backend, op, group, kit.Invalid("nil context"))
	}
	if err := kit.ValidateName(group); err != nil {
		return kit.Wrap(backend, op, group, fmt.Errorf("group: %w", err))
	}
	for _, id := range ids {
		if err := kit.ValidateMember(group, id); err != nil {
			return kit.Wrap(backend, op, group, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return kit.Wrap(backend, op, group, err)
	}
	if err := p.usable(group); err != nil {
		var ce *core.Error
		if errors.As(err, &ce) {
			ce.Op = op
		}
		return err
	}
	return nil
}

// withGroup runs fn with the group's directory while holding the group's
// lock, shared or exclusive, waiting for it until ctx ends.
func (p *Provider) withGroup(ctx context.Context, group string, shared bool, fn func(dir string) error) error {
	dir := filepath.Join(p.dir, membershipDir, fileStem(group))
	f, err := openLockFile(dir+".lock", os.O_RDONLY)
	if err != nil {
		return classify(err)
	}
	defer f.Close()
	for n := 0; ; n++ {
		err := lockNB(f, shared)
		if err == nil {
			break
		}
		if !errors.Is(err, errLocked) {
			return err
		}
		// Held only for a few file operations at a time: poll.
		select {
		case <-ctx.Done():
			return kit.NotAcquired(ctx)
		case <-time.After(p.backoff.Delay(n)):
		}
	}
	return classify(fn(dir))
}

// writeMember writes a member file in place. Readers hold the group's lock,
// so they never see it half written.
func writeMember(path string, content []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|oNoFollow, filePerm)
	if err != nil {
		return err
	}
	_, err = f.Write(content)
	return errors.Join(err, f.Close())
}

func memberPath(dir, id string) string {
	return filepath.Join(dir, fileStem(id)+".mem")
}

// readMembers returns the sorted ids of the live members in dir and the
// paths of the expired (or unreadable) member files.
func readMembers(dir string, now time.Time) (live, expired []string, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	live = []string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".mem") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		id, expiry, err := readMember(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case errors.Is(err, errBadMember) || (err == nil && !now.Before(expiry)):
			expired = append(expired, path)
		case err != nil:
			return nil, nil, err
		default:
			live = append(live, id)
		}
	}
	slices.Sort(live)
	return live, expired, nil
}

var errBadMember = errors.New("malformed member file")

func readMember(path string) (id string, expiry time.Time, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return "", time.Time{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return "", time.Time{}, err
	}
	line, rest, ok := bytes.Cut(b, []byte{'\n'})
	ns, perr := strconv.ParseInt(string(line), 10, 64)
	if !ok || perr != nil || len(rest) == 0 {
		return "", time.Time{}, errBadMember
	}
	return string(rest), time.Unix(0, ns), nil
}
