//go:build !linux

package filelock

import "errors"

// Mutex waiters line up only on Linux; elsewhere they race as the other
// kinds do (see priority).
const lines = false

type ticket struct{}

func takeTicket(string, func(bool)) (*ticket, bool, error) { return nil, false, errors.ErrUnsupported }

func (*ticket) unlink() {}

func (*ticket) close() {}

func wakeLine(string) {}

type bell struct{}

func newBell(string) *bell { return nil }

func (*bell) ring() {}
