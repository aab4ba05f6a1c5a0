//go:build !linux

package agent

import "syscall"

// The agent runs vLLM, which runs on Linux only; these keep the package
// compiling elsewhere, and New refuses to start.

const supported = false

var errUnsupported = errUnsupportedOS

func procAttr() *syscall.SysProcAttr { return nil }

func signalGroup(pgid int, sig syscall.Signal) error { return errUnsupported }

func groupAlive(pgid int) bool { return false }

func diskFree(path string) (uint64, error) { return 0, errUnsupported }
