package bench

import "syscall"

// childAttr makes the kernel kill a child when the bench dies, so an
// interrupted run leaves no gateway or mock behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// raiseFileLimit raises RLIMIT_NOFILE to at least n where it can (the hard
// limit needs privilege), so that children, which inherit it, can hold
// that many connections. It returns the soft limit now in force.
func raiseFileLimit(n uint64) uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	if lim.Cur >= n {
		return lim.Cur
	}
	want := syscall.Rlimit{Cur: n, Max: max(lim.Max, n)}
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) != nil {
		want = syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) != nil {
			return lim.Cur
		}
	}
	return want.Cur
}
