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
//	<dir>/membership/<group stem>/<id stem>.val   only for a non-empty value
//
// A member file holds the registration's expiry (Unix nanoseconds, by this
// host's clock) on its first line and the exact id after it, the format of
// versions without values, which still read it. A value file is described
// in announce.go.
const membershipDir = "membership"

// The extensions of member files and value files.
const (
	memExt = ".mem"
	valExt = ".val"
)

var _ core.Membership = (*Provider)(nil)

// Register adds id to group, or refreshes it, for ttl, with an empty value:
// Members lists it until ttl has passed without another Register. It
// rewrites one small file, and removes the member's value file, under the
// group's lock. Errors match core.ErrInvalidName for an empty or
// invalid group or id, core.ErrInvalidArgument for ttl ≤ 0, a nil context
// or a directory that cannot hold files.
func (p *Provider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	if err := p.registration(ctx, "register", group, id, ttl, nil); err != nil {
		return err
	}
	expiry := p.now().Add(ttl).UnixNano()
	err := p.withGroup(ctx, group, false, func(dir string) error {
		return writeRegistration(dir, id, expiry, nil)
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
		return removeFiles(memberPath(dir, id), valuePath(dir, id))
	})
	if err != nil {
		return kit.Wrap(backend, "deregister", group, fmt.Errorf("member %q: %w", id, err))
	}
	return nil
}

// Members lists the live ids of group, sorted: one read of the group's
// directory and of each member file, under the group's shared lock, and
// none of the value files. Expired registrations are not listed; Members
// removes their files.
func (p *Provider) Members(ctx context.Context, group string) ([]string, error) {
	if err := p.memberArgs(ctx, "members", group); err != nil {
		return nil, err
	}
	var live []core.Member
	var garbage []string
	err := p.withGroup(ctx, group, true, func(dir string) error {
		var err error
		live, garbage, err = readMembers(dir, p.now(), false)
		return err
	})
	if err == nil && len(garbage) > 0 {
		// Sweep under the exclusive lock, checking again: the member may
		// have registered since.
		err = p.withGroup(ctx, group, false, func(dir string) error {
			_, garbage, err := readMembers(dir, p.now(), false)
			if err != nil {
				return err
			}
			return removeFiles(garbage...)
		})
	}
	if err != nil {
		return nil, kit.Wrap(backend, "members", group, err)
	}
	ids := make([]string, len(live))
	for i, m := range live {
		ids[i] = m.ID
	}
	return ids, nil
}

// registration checks the arguments of a registration (op) as memberArgs
// does, and its value and ttl; its error is wrapped for op.
func (p *Provider) registration(ctx context.Context, op, group, id string, ttl time.Duration, value []byte) error {
	if err := p.memberArgs(ctx, op, group, id); err != nil {
		return err
	}
	if len(value) > core.MaxMemberValue {
		return kit.Wrap(backend, op, group, kit.ValidateAnnounce(group, id, value))
	}
	if ttl <= 0 {
		return kit.Wrap(backend, op, group, kit.Invalid("ttl %v must be positive", ttl))
	}
	return nil
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

// writeRegistration writes id's member file with expiry, and its value
// file, or removes that for an empty value, creating dir if it is missing.
// The value file goes first, so a crash between the two leaves it stale.
func writeRegistration(dir, id string, expiry int64, value []byte) error {
	write := func() error {
		val := valuePath(dir, id)
		if len(value) == 0 {
			if err := removeFiles(val); err != nil {
				return err
			}
		} else if err := writeFile(val, valueHeader(expiry, len(value)), value); err != nil {
			return err
		}
		content := append(strconv.AppendInt(nil, expiry, 10), '\n')
		return writeFile(memberPath(dir, id), append(content, id...))
	}
	err := write()
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(dir, dirPerm); err == nil {
			err = write()
		}
	}
	return err
}

// writeFile writes the concatenation of parts to path in place. Readers
// hold the group's lock, so they never see it half written.
func writeFile(path string, parts ...[]byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|oNoFollow, filePerm)
	if err != nil {
		return err
	}
	for _, b := range parts {
		if _, err = f.Write(b); err != nil {
			break
		}
	}
	return errors.Join(err, f.Close())
}

// removeFiles removes the files at paths; absent ones are not an error.
func removeFiles(paths ...string) error {
	var err error
	for _, path := range paths {
		if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

func memberPath(dir, id string) string {
	return filepath.Join(dir, fileStem(id)+memExt)
}

func valuePath(dir, id string) string {
	return filepath.Join(dir, fileStem(id)+valExt)
}

// readMembers returns the live members in dir sorted by ID, with their
// values when values is set, and the paths of the files to sweep: member
// files expired or unreadable, value files of no live member and, when
// values is set, stale value files.
func readMembers(dir string, now time.Time, values bool) (live []core.Member, garbage []string, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		names[e.Name()] = true
	}
	live = []core.Member{}
	for _, e := range entries {
		stem, ok := strings.CutSuffix(e.Name(), memExt)
		if !ok {
			if stem, ok := strings.CutSuffix(e.Name(), valExt); ok && !names[stem+memExt] {
				garbage = append(garbage, filepath.Join(dir, e.Name()))
			}
			continue
		}
		path, val := filepath.Join(dir, e.Name()), filepath.Join(dir, stem+valExt)
		id, expiry, err := readMember(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case errors.Is(err, errBadMember) || (err == nil && !now.Before(expiry)):
			garbage = append(garbage, path)
			if names[stem+valExt] {
				garbage = append(garbage, val)
			}
			continue
		case err != nil:
			return nil, nil, err
		}
		m := core.Member{ID: id}
		if values && names[stem+valExt] {
			m.Value, err = readValue(val, expiry.UnixNano())
			switch {
			case errors.Is(err, errStaleValue):
				garbage = append(garbage, val)
			case err != nil && !errors.Is(err, fs.ErrNotExist):
				return nil, nil, err
			}
		}
		live = append(live, m)
	}
	kit.SortMembers(live)
	return live, garbage, nil
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
