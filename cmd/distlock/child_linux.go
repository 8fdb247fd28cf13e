package main

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel kill CMD when distlock dies, so that CMD
// never runs on without the lock distlock held for it.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
