package filelock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// A value file, <id stem>.val beside the member file, holds
//
//	<expiry> <length>\n<value>
//
// with the expiry (Unix nanoseconds) of the member file written with it and
// the value's length in bytes. The value counts only while the member file
// holds the same expiry and the file holds length bytes after the header,
// so a value file that a crash cut short, or that a Register of a version
// without values left behind, reads as empty (and is swept). The member
// file keeps the format older versions read, and they ignore value files.

var _ core.Announcer = (*Provider)(nil)

// Announce registers id in group for ttl, as Register does, with value as
// its value, and returns the live members sorted by ID with their values,
// under one hold of the group's exclusive lock: it writes the value file
// (or removes it for an empty value) and the member file, then reads the
// directory, every member file and every value file, and removes the
// expired ones. Errors are Register's, and one matching
// core.ErrInvalidArgument for a value over core.MaxMemberValue bytes.
func (p *Provider) Announce(ctx context.Context, group, id string, ttl time.Duration, value []byte) ([]core.Member, error) {
	if err := p.registration(ctx, "announce", group, id, ttl, value); err != nil {
		return nil, err
	}
	expiry := p.now().Add(ttl).UnixNano()
	var live []core.Member
	err := p.withGroup(ctx, group, false, func(dir string) error {
		if err := writeRegistration(dir, id, expiry, value); err != nil {
			return fmt.Errorf("member %q: %w", id, err)
		}
		var garbage []string
		var err error
		live, garbage, err = readMembers(dir, p.now(), true)
		if err != nil {
			return err
		}
		return removeFiles(garbage...)
	})
	if err != nil {
		return nil, kit.Wrap(backend, "announce", group, err)
	}
	return live, nil
}

// errStaleValue marks a value file that does not belong to its member's
// registration, or that is cut short.
var errStaleValue = errors.New("stale member value")

func valueHeader(expiry int64, length int) []byte {
	b := strconv.AppendInt(make([]byte, 0, 32), expiry, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(length), 10)
	return append(b, '\n')
}

// readValue returns the value in the value file at path if it was written
// with the registration that expires at expiry, and errStaleValue if not.
func readValue(path string, expiry int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	if fi, err := f.Stat(); err == nil {
		buf.Grow(int(fi.Size()) + bytes.MinRead) // one read, and one for EOF
	}
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, err
	}
	header, value, ok := bytes.Cut(buf.Bytes(), []byte{'\n'})
	want := valueHeader(expiry, len(value))
	if !ok || !bytes.Equal(header, want[:len(want)-1]) {
		return nil, errStaleValue
	}
	return value, nil
}
