package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rolter/rolter/internal/agent"
	"github.com/rolter/rolter/internal/secret"
)

// agentCmd runs `rolter agent` on a GPU box (docs/fleet-agent.md).
func agentCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rolter agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg                  agent.Config
		vllmCommand, keyFile string
		modelsDirFl          string
		lf                   logFlags
	)
	fs.StringVar(&cfg.Server, "server", os.Getenv("ROLTER_SERVER"), "the gateway's base URL, e.g. https://rolter.internal (env ROLTER_SERVER; required)")
	fs.StringVar(&cfg.StateDir, "state-dir", envOr("ROLTER_AGENT_STATE_DIR", "./rolter-agent"), "state file and vLLM logs (env ROLTER_AGENT_STATE_DIR)")
	fs.StringVar(&modelsDirFl, "models-dir", "", "where weights are looked for and downloaded (default <state-dir>/models)")
	fs.StringVar(&vllmCommand, "vllm-command", "vllm", "the vLLM command (COMMAND), split on spaces; "+agent.LaunchDoc)
	fs.DurationVar(&cfg.Interval, "interval", agent.DefaultInterval, "how often the assignments are fetched")
	fs.DurationVar(&cfg.StopGrace, "stop-grace", agent.DefaultStopGrace, "how long vLLM may take to stop after SIGTERM before it is killed")
	fs.StringVar(&cfg.NvidiaSMI, "nvidia-smi", "nvidia-smi", "the nvidia-smi executable used to discover GPUs")
	fs.StringVar(&keyFile, "fleet-key-file", "", "file holding the fleet key (else env ROLTER_FLEET_KEY; never pass the key itself as a flag)")
	lf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if cfg.Server == "" {
		return errors.New("--server (or env ROLTER_SERVER) is required")
	}
	if cfg.Interval <= 0 || cfg.StopGrace <= 0 {
		return errors.New("--interval and --stop-grace must be positive")
	}
	cfg.Command = strings.Fields(vllmCommand)
	if len(cfg.Command) == 0 {
		return errors.New("--vllm-command is empty")
	}
	cfg.ModelsDir = modelsDirFl
	if cfg.ModelsDir == "" {
		cfg.ModelsDir = filepath.Join(cfg.StateDir, "models")
	}
	key, err := fleetKey(keyFile)
	if err != nil {
		return err
	}
	cfg.FleetKey = key
	log, err := lf.logger(stderr)
	if err != nil {
		return err
	}
	cfg.Log = log
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	log.Info("rolter agent starting", "server", cfg.Server, "state_dir", cfg.StateDir, "models_dir", cfg.ModelsDir, "interval", cfg.Interval)
	return a.Run(ctx)
}

// fleetKey reads the fleet key from --fleet-key-file, else from env
// ROLTER_FLEET_KEY. The variable is removed from the environment so that
// no child process inherits it.
func fleetKey(file string) (secret.Secret, error) {
	env := os.Getenv("ROLTER_FLEET_KEY")
	_ = os.Unsetenv("ROLTER_FLEET_KEY") // fails only for a malformed name
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return secret.Secret{}, fmt.Errorf("--fleet-key-file: %w", err)
		}
		k := strings.TrimSpace(string(b))
		if k == "" {
			return secret.Secret{}, fmt.Errorf("--fleet-key-file: %s is empty", file)
		}
		return secret.New(k), nil
	}
	if k := strings.TrimSpace(env); k != "" {
		return secret.New(k), nil
	}
	return secret.Secret{}, errors.New("no fleet key: set ROLTER_FLEET_KEY or --fleet-key-file")
}
