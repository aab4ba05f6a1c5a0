package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is a process the bench started: the mock upstream or a gateway.
// Its stderr is kept (the tail) to explain a failure.
type child struct {
	name   string
	cmd    *exec.Cmd
	stderr *tail
	done   chan struct{} // closed when the process has exited
	err    error         // Wait's result, valid after done
}

// startChild runs exe with args. env replaces the environment; stdout is
// where the child's stdout goes (nil: discarded).
func startChild(name, exe string, args, env []string, stdout io.Writer) (*child, error) {
	c := &child{name: name, stderr: &tail{max: 8 << 10}, done: make(chan struct{})}
	c.cmd = exec.Command(exe, args...)
	c.cmd.Env = env
	c.cmd.Stdout = stdout
	c.cmd.Stderr = c.stderr
	c.cmd.SysProcAttr = childAttr()
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// exited returns an error describing the child's exit, or nil while it runs.
func (c *child) exited() error {
	select {
	case <-c.done:
		return fmt.Errorf("%s exited (%v): %s", c.name, c.err, c.stderr.String())
	default:
		return nil
	}
}

// stop asks the child to shut down (SIGTERM) and kills it if it has not
// exited within grace.
func (c *child) stop(grace time.Duration) {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// tail is an io.Writer that keeps the last max bytes written.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// childEnv is the bench's environment without ROLTER_* and OTEL_*
// variables, so that a developer's shell settings (a store URL, a config
// file, a trace collector) cannot leak into the measured processes, plus
// extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ROLTER_") && !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// startMock runs `rolter mock` and returns it with its base URL
// (http://host:port, no path).
func startMock(exe string) (*child, string, error) {
	r, w := io.Pipe()
	c, err := startChild("mock", exe, []string{"mock", "--listen", "127.0.0.1:0", "--print-addr"}, childEnv(), w)
	if err != nil {
		return nil, "", err
	}
	// The first stdout line is the bound address; anything after it is
	// drained so the child never blocks on a full pipe.
	addr := make(chan string, 1)
	go func() {
		br := bufio.NewReader(r)
		line, _ := br.ReadString('\n')
		addr <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, br)
	}()
	go func() { <-c.done; w.Close() }()
	select {
	case a := <-addr:
		if a == "" {
			c.stop(time.Second)
			return nil, "", fmt.Errorf("mock printed no address: %s", c.stderr.String())
		}
		return c, "http://" + a, nil
	case <-time.After(30 * time.Second):
		c.stop(time.Second)
		return nil, "", errors.New("mock did not print its address within 30s")
	}
}

// freePort returns a loopback port that was free a moment ago. `rolter
// serve` reports its bound address only in its log, which the bench keeps
// at error level, so the port is chosen here; the race with other
// processes is harmless on a quiet machine and reported if lost.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitReady polls url until it answers 200, the child exits, or timeout.
func waitReady(ctx context.Context, c *child, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := c.exited(); err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready at %s after %v (last error: %v)", c.name, url, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
