package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/server"
)

// Replicas in other processes. The multi-replica tests run each gateway as
// its own OS process, as `rolter serve` replicas run: the test binary
// re-executes itself with replicaEnv set, and TestMain then runs one
// gateway (server.Run) instead of the tests. Re-executing the test binary
// spares the tests a `go build` of cmd/rolter. A replica shares nothing
// with the test process or the other replicas but what real replicas
// share: the store and Redis.

// replicaEnv holds a replica's replicaConfig as JSON; the admin token
// travels as ROLTER_ADMIN_TOKEN, as for `rolter serve`.
const replicaEnv = "ROLTER_TEST_REPLICA"

// replicaConfig is the part of server.Config a replica takes from its
// test. It listens on 127.0.0.1:0 and logs its bound address on stderr.
type replicaConfig struct {
	Store        string
	DataDir      string
	Redis        string
	RedisPrefix  string
	RedisTimeout time.Duration
}

// replicaMain runs one gateway until SIGTERM or SIGINT, or until its
// standard input closes (the test process is gone: no orphan outlives
// it), logging to stderr. It returns the exit code.
func replicaMain() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var rc replicaConfig
	if err := json.Unmarshal([]byte(os.Getenv(replicaEnv)), &rc); err != nil {
		log.Error("bad "+replicaEnv, "err", err)
		return 2
	}
	cfg := server.Config{Listen: "127.0.0.1:0", Store: rc.Store, DataDir: rc.DataDir,
		AdminToken: secret.New(os.Getenv("ROLTER_ADMIN_TOKEN")), ShutdownTimeout: 5 * time.Second,
		Redis: rc.Redis, RedisPrefix: rc.RedisPrefix, RedisTimeout: rc.RedisTimeout}
	cfg.Fleet.DisableController = true
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	if err := server.Run(ctx, cfg, log); err != nil {
		log.Error("replica failed", "err", err)
		return 1
	}
	return 0
}

// servingRe finds the bound address in the "rolter serving" log line.
var servingRe = regexp.MustCompile(`msg="rolter serving" addr=(\S+)`)

// replicaLog keeps a replica's output and reports its address once the
// gateway serves.
type replicaLog struct {
	syncBuffer
	found atomic.Bool
	ready chan string
}

// Write is called by one goroutine of exec.Cmd at a time.
func (l *replicaLog) Write(p []byte) (int, error) {
	n, err := l.syncBuffer.Write(p)
	if !l.found.Load() {
		if m := servingRe.FindStringSubmatch(l.String()); m != nil {
			l.found.Store(true)
			l.ready <- m[1]
		}
	}
	return n, err
}

// tail is the end of the replica's log, for failure messages.
func (l *replicaLog) tail() string {
	s := l.String()
	return s[max(0, len(s)-4000):]
}

// startReplica starts a gateway process with rc and the limits tests'
// admin token, and returns it once it serves. When t ends the replica gets
// SIGTERM, and SIGKILL if it has not exited 20s later; an exit other than
// a clean one fails the test.
func startReplica(t *testing.T, rc replicaConfig) *limitsEnv {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(rc)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), replicaEnv+"="+string(js), "ROLTER_ADMIN_TOKEN="+limitsAdmin)
	logs := &replicaLog{ready: make(chan string, 1)}
	cmd.Stdout, cmd.Stderr = logs, logs
	// The replica stops when this pipe closes: when cmd.Wait returns, or
	// when the test process dies without cleaning up.
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			if waitErr != nil {
				t.Errorf("replica pid %d: %v\n%s", cmd.Process.Pid, waitErr, logs.tail())
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("replica pid %d did not stop within 20s of SIGTERM; killed\n%s", cmd.Process.Pid, logs.tail())
		}
	})
	select {
	case addr := <-logs.ready:
		t.Logf("replica pid %d serving on %s", cmd.Process.Pid, addr)
		return &limitsEnv{run: &run{addr: addr, out: &syncBuffer{}, logs: &logs.syncBuffer}, t: t}
	case <-exited:
		t.Fatalf("replica exited before serving: %v\n%s", waitErr, logs.tail())
	case <-time.After(60 * time.Second):
		t.Fatalf("replica not serving after 60s\n%s", logs.tail())
	}
	return nil
}

// waitKnows waits until replica g has learned key (through LISTEN/NOTIFY
// from the replica that created it).
func (e *limitsEnv) waitKnows(key string) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _ := e.call(e.t, "GET", "/v1/models", key, "")
		if code == 200 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("replica %s never learned the key: %d", e.addr, code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
