package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
)

// child supervises the vLLM of one assignment: it restarts it with backoff
// when it exits on its own, and stops it (SIGTERM to its process group,
// SIGKILL after the grace period) when asked.
type child struct {
	a       fleetapi.Assignment // what it was started from
	argv    []string            // holds the vLLM API key: never log it, use redactArgs
	env     []string
	place   placement // its GPUs, counted against the box's other assignments
	kv      *kvCalib  // kv_cache: auto; nil otherwise
	kvTick  time.Duration
	logPath string
	grace   time.Duration
	log     *slog.Logger

	restartMin, restartMax time.Duration

	stopOnce sync.Once
	stopCh   chan struct{} // closed to ask the supervisor to stop
	done     chan struct{} // closed when the supervisor has returned

	mu       sync.Mutex
	pid      int    // of the running process; 0 while none runs
	lastExit string // why the last process ended, while none runs
	restarts int
	version  string // vLLM's /version, once read
}

// start launches the first process and, when that worked, supervises it.
// An error (the command cannot be started) leaves nothing behind.
func (c *child) start() error {
	c.stopCh = make(chan struct{})
	c.done = make(chan struct{})
	cmd, err := c.spawn()
	if err != nil {
		return err
	}
	go c.supervise(cmd)
	return nil
}

// spawn starts one process, its output appended to the log file.
func (c *child) spawn() (*exec.Cmd, error) {
	f, err := os.OpenFile(c.logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open vLLM log: %w", err)
	}
	defer f.Close() //nolint:errcheck // the child has its own descriptor once started
	fmt.Fprintf(f, "\n--- rolter agent %s: starting vLLM for host %d, revision %s: %s\n",
		time.Now().UTC().Format(time.RFC3339), c.a.HostID, c.a.Revision, redactArgs(c.argv))
	if c.kv.calibrating() {
		// The figures are read from what this launch writes.
		c.kv.off, c.kv.partial = 0, nil
		if fi, err := f.Stat(); err == nil {
			c.kv.off = fi.Size()
		}
	}
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Env = c.env
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start vLLM: %w", err)
	}
	c.mu.Lock()
	c.pid = cmd.Process.Pid
	c.lastExit = ""
	c.version = ""
	c.mu.Unlock()
	c.log.Info("vLLM started", "pid", cmd.Process.Pid, "command", redactArgs(c.argv), "log", c.logPath)
	return cmd, nil
}

func (c *child) supervise(cmd *exec.Cmd) {
	defer close(c.done)
	backoff := c.restartMin
	for {
		if cmd != nil {
			waited := make(chan error, 1)
			proc := cmd // calibrate may replace cmd
			go func() { waited <- proc.Wait() }()
			var stopped bool
			if cmd, stopped = c.calibrate(cmd, waited); stopped {
				return
			}
			pid := cmd.Process.Pid
			started := time.Now()
			select {
			case err := <-waited:
				why := exitString(err)
				c.log.Warn("vLLM exited on its own", "pid", pid, "status", why, "ran", time.Since(started).Round(time.Millisecond))
				c.reapGroup(pid)
				c.mu.Lock()
				c.pid = 0
				c.lastExit = "vLLM exited (" + why + ")"
				c.mu.Unlock()
				if time.Since(started) >= c.restartMax {
					backoff = c.restartMin // it ran a good while: a fresh failure
				}
			case <-c.stopCh:
				c.terminate(pid, waited)
				c.mu.Lock()
				c.pid = 0
				c.mu.Unlock()
				return
			}
		}
		c.log.Info("restarting vLLM", "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-c.stopCh:
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, c.restartMax)
		c.mu.Lock()
		c.restarts++
		c.mu.Unlock()
		var err error
		if cmd, err = c.spawn(); err != nil {
			c.log.Error("vLLM restart failed", "error", err)
			c.mu.Lock()
			c.lastExit = err.Error()
			c.mu.Unlock()
		}
	}
}

// calibrate watches the log of a calibrating launch until vLLM has logged
// its --kv-cache-memory figure, then relaunches it with that figure. It
// returns the process now running (waited will carry its status) and
// stopped when it was asked to stop meanwhile (the process is then
// stopped). It returns once nothing is left to calibrate or the process
// exited.
func (c *child) calibrate(cmd *exec.Cmd, waited chan error) (_ *exec.Cmd, stopped bool) {
	if !c.kv.calibrating() {
		return cmd, false
	}
	t := time.NewTicker(c.kvTick)
	defer t.Stop()
	for c.kv.calibrating() {
		select {
		case err := <-waited:
			waited <- err // for the caller's select
			return cmd, false
		case <-c.stopCh:
			c.terminate(cmd.Process.Pid, waited)
			c.mu.Lock()
			c.pid = 0
			c.mu.Unlock()
			return cmd, true
		case <-t.C:
		}
		argv := c.kv.scan(c.logPath)
		if argv == nil {
			if st := c.kv.snapshot(); st.State == fleetapi.KVFailed {
				c.log.Warn("kv-cache calibration failed; vLLM keeps running at the conservative setting", "reason", st.Error)
			}
			continue
		}
		st := c.kv.snapshot()
		c.log.Info("kv-cache calibrated: relaunching vLLM with vLLM's --kv-cache-memory figure",
			"kv_cache_memory", st.Bytes, "first_launch_kv_cache", st.InitialBytes)
		c.terminate(cmd.Process.Pid, waited)
		c.mu.Lock()
		c.argv, c.env = argv, c.kv.env
		c.mu.Unlock()
		next, err := c.spawn()
		if err != nil {
			c.log.Error("vLLM relaunch failed", "error", err)
			c.mu.Lock()
			c.pid, c.lastExit = 0, err.Error()
			c.mu.Unlock()
			waited <- err // the supervisor's usual restart path
			return cmd, false
		}
		cmd = next
		go func() { waited <- next.Wait() }()
	}
	return cmd, false
}

// terminate stops the process group led by pid: SIGTERM, then SIGKILL for
// whatever is left after the grace period.
func (c *child) terminate(pid int, waited <-chan error) {
	deadline := time.Now().Add(c.grace)
	c.log.Info("stopping vLLM", "pid", pid, "grace", c.grace)
	if err := signalGroup(pid, syscall.SIGTERM); err != nil {
		c.log.Warn("signal vLLM", "pid", pid, "error", err)
	}
	t := time.NewTimer(c.grace)
	defer t.Stop()
	var err error
	select {
	case err = <-waited:
	case <-t.C:
		c.log.Warn("vLLM did not stop within the grace period; killing it", "pid", pid, "grace", c.grace)
		_ = signalGroup(pid, syscall.SIGKILL)
		err = <-waited
	}
	c.log.Info("vLLM stopped", "pid", pid, "status", exitString(err))
	c.waitGroup(pid, deadline)
}

// reapGroup clears what a crashed vLLM left in its group (workers would
// hold GPU memory and the next start would fail): SIGTERM, then SIGKILL
// after the grace period.
func (c *child) reapGroup(pgid int) {
	if !groupAlive(pgid) {
		return
	}
	_ = signalGroup(pgid, syscall.SIGTERM)
	c.waitGroup(pgid, time.Now().Add(c.grace))
}

// waitGroup waits until group pgid is empty or deadline has passed, then
// kills what is left.
func (c *child) waitGroup(pgid int, deadline time.Time) {
	for groupAlive(pgid) {
		if time.Now().After(deadline) {
			c.log.Warn("killing what is left of vLLM's process group", "pgid", pgid)
			_ = signalGroup(pgid, syscall.SIGKILL)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop asks the supervisor to stop the process and waits until it has.
func (c *child) stop() {
	c.stopOnce.Do(func() { close(c.stopCh) })
	<-c.done
}

// running returns the pid of the live process, or 0 and why none runs.
func (c *child) running() (pid int, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pid != 0 {
		return c.pid, ""
	}
	why = c.lastExit
	if why == "" {
		why = "vLLM is not running"
	}
	return 0, why + "; restarting"
}

// probeVersion reads vLLM's /version once the process serves it.
func (c *child) probeVersion(ctx context.Context, client *http.Client) string {
	c.mu.Lock()
	pid, v := c.pid, c.version
	c.mu.Unlock()
	if pid == 0 || v != "" {
		return v
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(c.a.Port)+"/version", nil)
	if err != nil {
		return ""
	}
	resp, err := client.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var body struct {
		Version string `json:"version"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body) != nil {
		return ""
	}
	c.mu.Lock()
	if c.pid == pid {
		c.version = body.Version
	}
	c.mu.Unlock()
	return body.Version
}

func exitString(err error) string {
	if err == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ProcessState.String()
	}
	return err.Error()
}

// redactArgs is argv for a log line: the values of --api-key and of any
// flag named like a credential are replaced.
func redactArgs(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		switch {
		case i > 0 && secretFlag(argv[i-1]) && !strings.HasPrefix(a, "--"): //nolint:gosec // G602: i > 0 guards argv[i-1]
			out[i] = "[redacted]"
		case strings.HasPrefix(a, "--") && strings.Contains(a, "=") && secretFlag(a[:strings.IndexByte(a, '=')]):
			out[i] = a[:strings.IndexByte(a, '=')+1] + "[redacted]"
		default:
			out[i] = a
		}
	}
	return strings.Join(out, " ")
}

func secretFlag(f string) bool {
	if !strings.HasPrefix(f, "--") {
		return false
	}
	f = strings.ToLower(f)
	for _, s := range []string{"key", "token", "secret", "password"} {
		if strings.Contains(f, s) {
			return true
		}
	}
	return false
}
