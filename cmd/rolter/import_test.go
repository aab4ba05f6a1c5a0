package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/litellm"
	"github.com/rolter/rolter/internal/store/sqlstore"
)

const (
	cmdEnvKey     = "sk-cmd-test-env-0001"
	cmdLiteralKey = "sk-cmd-test-literal-0002"
)

const liteLLMFile = `model_list:
  - model_name: gpt-4o
    litellm_params:
      model: openai/gpt-4o
      api_key: os.environ/ROLTER_CMD_TEST_KEY
      rpm: 100
  - model_name: gpt-4o
    litellm_params:
      model: openai/gpt-4o
      api_key: ` + cmdLiteralKey + `
  - model_name: qwen3
    litellm_params:
      model: hosted_vllm/Qwen/Qwen3-8B
      api_base: http://10.0.0.5:8000/v1
litellm_settings:
  drop_params: true
`

// runCmd runs the CLI as main does and checks no provider key leaks.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	for _, k := range []string{cmdEnvKey, cmdLiteralKey} {
		if strings.Contains(out.String()+errb.String(), k) {
			t.Errorf("the key %q was printed:\n%s\n%s", k, out.String(), errb.String())
		}
	}
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func cmdEnv(t *testing.T) {
	t.Setenv("ROLTER_CMD_TEST_KEY", cmdEnvKey)
	t.Setenv("ROLTER_MASTER_KEY", "")
	t.Setenv("ROLTER_ADMIN_TOKEN", "")
	t.Setenv("ROLTER_STORE", "")
	t.Setenv("ROLTER_LOG_LEVEL", "")
}

func openStore(t *testing.T, dataDir string) *sqlstore.DB {
	t.Helper()
	db, err := sqlstore.Open(context.Background(), "sqlite", dataDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

var reportLine = regexp.MustCompile(`(?m)^default, (\d+), openai api\.openai\.com/v1, openai-api-openai-com-v1, openai-api-openai-com-v1-2$`)

func TestImportLiteLLM(t *testing.T) {
	cmdEnv(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	file := writeFile(t, dir, "config.yaml", liteLLMFile)

	// A dry run on a fresh data dir does not even create the database.
	code, out, errs := runCmd(t, "import", "--data-dir", data, "--dry-run", file)
	if code != 0 {
		t.Fatalf("dry run exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, "default, -, openai api.openai.com/v1, openai-api-openai-com-v1, openai-api-openai-com-v1-2\n") ||
		!strings.Contains(out, "would create 3 providers, 2 routes") {
		t.Errorf("dry run output:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(data, sqlstore.SQLiteFile)); !os.IsNotExist(err) {
		t.Errorf("dry run created the database: %v", err)
	}

	code, out, errs = runCmd(t, "import", "--data-dir", data, file)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, litellm.ReportHeader) || !reportLine.MatchString(out) {
		t.Errorf("no slug report line:\n%s", out)
	}
	if !strings.HasSuffix(out, "created 3 providers, 2 routes; skipped 0 providers, 0 routes (already present)\n") {
		t.Errorf("summary:\n%s", out)
	}
	for _, w := range []string{
		"rolter import: warning: ignored litellm_settings.drop_params: no rolter equivalent\n",
		"rolter import: warning: ignored litellm_params.rpm in model_list[0]",
	} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errs)
		}
	}
	db := openStore(t, data)
	o, err := db.GetOrg(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	p, err := db.GetProvider(context.Background(), o.ID, "openai-api-openai-com-v1-2")
	if err != nil {
		t.Fatal(err)
	}
	if m := reportLine.FindStringSubmatch(out); m == nil || m[1] != strconv.FormatInt(p.ID, 10) {
		t.Errorf("report names provider id %v, want %d", m, p.ID)
	}

	// Again: nothing new, no report.
	code, out, errs = runCmd(t, "import", "--data-dir", data, file)
	if code != 0 {
		t.Fatalf("second run exit %d\n%s\n%s", code, out, errs)
	}
	if strings.Contains(out, litellm.ReportHeader) || !strings.HasSuffix(out, "created 0 providers, 0 routes; skipped 3 providers, 2 routes (already present)\n") {
		t.Errorf("second run:\n%s", out)
	}
}

func TestImportBadEntryWritesNothing(t *testing.T) {
	cmdEnv(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	bad := strings.Replace(liteLLMFile, "      api_base: http://10.0.0.5:8000/v1\n", "", 1) // vLLM without api_base
	file := writeFile(t, dir, "config.yaml", bad)
	code, out, errs := runCmd(t, "import", "--data-dir", data, file)
	if code != 1 || !strings.Contains(errs, `model_list[2] (model_name "qwen3"): litellm_params.api_base: is required for vllm servers`) {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	db := openStore(t, data)
	st, err := db.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Providers) != 0 || len(st.Routes) != 0 || len(st.Orgs) != 0 {
		t.Errorf("a refused import wrote: %d orgs, %d providers, %d routes", len(st.Orgs), len(st.Providers), len(st.Routes))
	}
}

func TestImportRolterFile(t *testing.T) {
	cmdEnv(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	file := writeFile(t, dir, "rolter.yaml", `orgs:
  - name: acme
    providers:
      - name: vLLM Moscow
        slug: vllm-msk
        kind: vllm
        base_url: http://10.0.0.5:8000/v1
        keys:
          - secret_env: ROLTER_CMD_TEST_KEY
    projects:
      - name: web
        routes:
          - model: qwen3
            targets: [{provider: vllm-msk, upstream_model: Qwen/Qwen3-8B}]
`)
	if code, out, errs := runCmd(t, "import", "--data-dir", data, "--org", "x", file); code != 1 || !strings.Contains(errs, "--org and --project apply to LiteLLM files") {
		t.Errorf("--org with a rolter file: exit %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs := runCmd(t, "import", "--data-dir", data, "--strict", file); code != 1 || !strings.Contains(errs, "--strict and --probe apply to LiteLLM files") {
		t.Errorf("--strict with a rolter file: exit %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs := runCmd(t, "import", "--data-dir", data, file); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	db := openStore(t, data)
	o, err := db.GetOrg(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	st, err := db.Load(context.Background()) // Load opens key secrets
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Providers) != 1 || st.Providers[0].Slug != "vllm-msk" || len(st.Providers[0].Keys) != 1 ||
		st.Providers[0].Keys[0].Secret.Reveal() != cmdEnvKey {
		t.Errorf("provider vllm-msk with its key not imported")
	}
	pj, err := db.GetProject(context.Background(), o.ID, "web")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetRoute(context.Background(), pj.ID, "qwen3"); err != nil {
		t.Errorf("route: %v", err)
	}
}

func TestImportRefusesOtherFiles(t *testing.T) {
	cmdEnv(t)
	dir := t.TempDir()
	for _, tc := range []struct{ body, want string }{
		{"providers: []\n", "neither a LiteLLM config (no top-level model_list) nor a rolter config (no top-level orgs)"},
		{"", "the file is empty"},
		{"- a\n- b\n", "not a YAML mapping"},
		{"model_list: []\norgs: []\n", "both model_list (LiteLLM) and orgs (rolter)"},
	} {
		file := writeFile(t, dir, "f.yaml", tc.body)
		code, out, errs := runCmd(t, "import", "--data-dir", filepath.Join(dir, "data"), file)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q\n%s", tc.body, code, errs, tc.want, out)
		}
	}
	if code, _, errs := runCmd(t, "import"); code != 1 || !strings.Contains(errs, "want exactly one FILE") {
		t.Errorf("no FILE: exit %d\n%s", code, errs)
	}
	if code, _, errs := runCmd(t, "import", filepath.Join(dir, "missing.yaml")); code != 1 || !strings.Contains(errs, "no such file") {
		t.Errorf("missing FILE: exit %d\n%s", code, errs)
	}
}

// A LiteLLM file with an entry rolter cannot serve and a key from the
// environment.
const forgivingFile = `model_list:
  - model_name: gpt-4o
    litellm_params:
      model: openai/gpt-4o
      api_key: os.environ/ROLTER_CMD_TEST_KEY
  - model_name: gpt-4o
    litellm_params:
      model: azure/gpt-4o
      api_base: https://example.openai.azure.com
      api_key: ` + cmdLiteralKey + `
  - model_name: openai/*
    litellm_params:
      model: openai/*
      api_key: os.environ/ROLTER_CMD_TEST_KEY
general_settings:
  master_key: sk-cmd-master-never-printed
`

// TestImportLiteLLMForgiving: skipped entries fail the import only with
// --strict, and a dry run needs no variable set.
func TestImportLiteLLMForgiving(t *testing.T) {
	cmdEnv(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	file := writeFile(t, dir, "config.yaml", forgivingFile)
	counts := func() (int, int) {
		t.Helper()
		st, err := openStore(t, data).Load(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return len(st.Providers), len(st.Routes)
	}

	// A dry run on another machine: the variable is not set.
	t.Setenv("ROLTER_CMD_TEST_KEY", "")
	code, out, errs := runCmd(t, "import", "--data-dir", data, "--dry-run", file)
	if code != 0 {
		t.Fatalf("dry run without the variable: exit %d\n%s\n%s", code, out, errs)
	}
	for _, w := range []string{
		litellm.UnsetHeader + "\nROLTER_CMD_TEST_KEY: model_list[0].litellm_params.api_key, model_list[2].litellm_params.api_key\n",
		litellm.SkippedHeader + "\n1, gpt-4o, \"LiteLLM provider azure/ has no rolter equivalent",
		"would create group openai for openai/*: openai-api-openai-com-v1 weight 1 (clients ask for openai/<model>)\n",
		"dry run: would create 1 providers, 1 routes, 1 groups; would skip 0 providers, 0 routes (already present); 1 entry not imported; nothing written\n",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("dry run output lacks %q:\n%s", w, out)
		}
	}
	if !strings.Contains(errs, "rolter import: warning: ignored general_settings.master_key: rolter has no master key") || strings.Contains(errs+out, "sk-cmd-master-never-printed") {
		t.Errorf("stderr:\n%s", errs)
	}
	if _, err := os.Stat(filepath.Join(data, sqlstore.SQLiteFile)); !os.IsNotExist(err) {
		t.Errorf("dry run created the database: %v", err)
	}
	// The real import needs it, and says so before writing anything.
	if code, out, errs := runCmd(t, "import", "--data-dir", data, file); code != 1 || !strings.Contains(errs, "environment variable ROLTER_CMD_TEST_KEY is not set") {
		t.Errorf("import without the variable: exit %d\n%s\n%s", code, out, errs)
	}

	t.Setenv("ROLTER_CMD_TEST_KEY", cmdEnvKey)
	code, out, errs = runCmd(t, "import", "--data-dir", data, "--strict", file)
	if code != 1 || !strings.Contains(errs, "--strict: 1 entry skipped (model_list[1]); nothing written") || !strings.Contains(out, litellm.SkippedHeader) {
		t.Errorf("--strict: exit %d\n%s\n%s", code, out, errs)
	}
	if p, r := counts(); p+r != 0 {
		t.Errorf("--strict wrote %d providers, %d routes", p, r)
	}
	code, out, errs = runCmd(t, "import", "--data-dir", data, file)
	if code != 0 || !strings.HasSuffix(out, "created 1 providers, 1 routes, 1 groups; skipped 0 providers, 0 routes (already present); 1 entry not imported\n") {
		t.Errorf("import: exit %d\n%s\n%s", code, out, errs)
	}
	if p, r := counts(); p != 1 || r != 1 {
		t.Errorf("import wrote %d providers, %d routes", p, r)
	}
}
