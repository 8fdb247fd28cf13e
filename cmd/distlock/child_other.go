//go:build !linux

package main

import "os/exec"

// setDeathSignal does nothing where the kernel cannot tie CMD's life to
// distlock's.
func setDeathSignal(*exec.Cmd) {}
