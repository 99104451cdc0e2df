package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// plainDir is a temporary folder whose path the error printer shows as is
// (t.TempDir's embeds the test's name and digits, which read as a token and
// are masked).
func plainDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "paths")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// TestRelativePathsResolveAgainstTheConfigFolder: every relative path in
// the configuration file (data_dir, its default, and every *_file key, in
// nested sections, maps and lists alike) is resolved against the file's
// folder, wherever the command starts; --data-dir and IDEMGATE_DATA_DIR
// against the working directory; without a file, everything against the
// working directory.
func TestRelativePathsResolveAgainstTheConfigFolder(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("IDEMGATE_DATA_DIR", "")
	t.Setenv("IDEMGATE_CONFIG", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	etc := t.TempDir()
	cfg := filepath.Join(etc, "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`
env: test
data_dir: state
console:
  session_key_file: keys/session
adapters:
  yookassa:
    shop_id: "1"
    secret_key_file: secrets/yookassa
  http:
    shipments:
      auth: {scheme: bearer, secret_file: secrets/shipments}
ingest:
  sources:
    - name: yookassa
      secrets_file: /abs/secrets
      refetch: {shop_id: "1", secret_key_file: ../elsewhere/yk}
    - name: stripe
      secrets_file: secrets/stripe
`), 0o600))
	wd := t.TempDir()
	t.Chdir(wd)

	c, err := loadConfig(flagsWith(t, "--config", cfg))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(etc, "state"), c.DataDir)
	require.Equal(t, filepath.Join(etc, "keys/session"), c.Console.SessionKeyFile)
	require.Equal(t, filepath.Join(etc, "secrets/yookassa"), c.Adapters.YooKassa.SecretKey.File)
	require.Equal(t, filepath.Join(etc, "secrets/shipments"), c.Adapters.HTTP["shipments"].Auth.SecretFile)
	require.Equal(t, "/abs/secrets", c.Ingest.Sources[0].SecretsFile, "an absolute path stays")
	require.Equal(t, filepath.Join(filepath.Dir(etc), "elsewhere/yk"), c.Ingest.Sources[0].Refetch.SecretKeyFile)
	require.Equal(t, filepath.Join(etc, "secrets/stripe"), c.Ingest.Sources[1].SecretsFile)

	c, err = loadConfig(flagsWith(t, "--config", cfg, "--data-dir", "mine"))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(wd, "mine"), c.DataDir, "a flag: the working directory")
	t.Setenv("IDEMGATE_DATA_DIR", "fromenv")
	c, err = loadConfig(flagsWith(t, "--config", cfg))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(wd, "fromenv"), c.DataDir, "the environment: the working directory")
	t.Setenv("IDEMGATE_DATA_DIR", "")

	bare := filepath.Join(t.TempDir(), "bare.yaml")
	require.NoError(t, os.WriteFile(bare, []byte("env: test\n"), 0o600))
	c, err = loadConfig(flagsWith(t, "--config", bare))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(filepath.Dir(bare), ".idemgate"), c.DataDir, "the default is the file's too")

	c, err = loadConfig(flagsWith(t))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(wd, ".idemgate"), c.DataDir, "no file: the working directory")
}

// TestReadersRefuseAMissingJournalNamingIt: `idemgate mcp --config
// /etc/…/config.yaml` started from another folder (a desktop MCP client
// starts it from /) before any daemon made the journal creates nothing —
// neither in the working directory nor beside the file — and names the
// absolute path it expected, with no hint to `migrate up` (which would make
// a second, empty journal). Once the journal exists where that
// configuration puts it, a command started from anywhere finds it.
func TestReadersRefuseAMissingJournalNamingIt(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("IDEMGATE_DATA_DIR", "")
	etc := plainDir(t)
	cfg := filepath.Join(etc, "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("env: test\nadmin: {addr: ''}\n"), 0o600))
	want := filepath.Join(etc, ".idemgate", "journal.db")
	wd := t.TempDir()
	t.Chdir(wd)

	for _, args := range [][]string{{"mcp"}, {"trace", "test:payment.charge:evt-1:v1"}, {"trace", "--unresolved"}} {
		code, _, stderr := runTool(t, append(args, "--config", cfg)...)
		require.NotEqual(t, exitOK, code, args)
		require.Contains(t, stderr, "no SQLite journal at "+want, args)
		require.NotContains(t, stderr, "migrate up", args)
		require.NoDirExists(t, filepath.Join(wd, ".idemgate"), "nothing made in the working directory")
		require.NoDirExists(t, filepath.Join(etc, ".idemgate"), "nothing made beside the file")
	}

	// `migrate up` from a third folder creates it beside the file; a
	// reader from the working directory then finds it.
	t.Chdir(t.TempDir())
	code, _, stderr := runTool(t, "migrate", "up", "--config", cfg)
	require.Equal(t, exitOK, code, stderr)
	require.FileExists(t, want)
	t.Chdir(wd)
	code, out, stderr := runTool(t, "trace", "--unresolved", "--config", cfg)
	require.Equal(t, exitOK, code, stderr)
	require.NotContains(t, out+stderr, "no SQLite journal")
}

// TestAMovedDataDirIsRefused: a journal that earlier versions kept in
// ./.idemgate of the working directory, while data_dir now resolves beside
// the configuration file where there is none, stops `run` and `migrate up`
// with both paths named, instead of starting a second, empty journal.
func TestAMovedDataDirIsRefused(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("IDEMGATE_DATA_DIR", "")
	wd := plainDir(t)
	t.Chdir(wd)
	code, _, stderr := runTool(t, "migrate", "up", "--data-dir", ".idemgate")
	require.Equal(t, exitOK, code, stderr)
	require.FileExists(t, filepath.Join(wd, ".idemgate", "journal.db"))

	etc := plainDir(t)
	cfg := filepath.Join(etc, "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("env: test\nadmin: {addr: ''}\nnats: {embedded_addr: 127.0.0.1:0}\n"), 0o600))
	for _, args := range [][]string{{"run"}, {"migrate", "up"}} {
		code, _, stderr = runTool(t, append(args, "--config", cfg)...)
		require.Equal(t, exitConfig, code, "%v: %s", args, stderr)
		require.Contains(t, stderr, filepath.Join(wd, ".idemgate"), args)
		require.Contains(t, stderr, filepath.Join(etc, ".idemgate"), args)
		require.NoDirExists(t, filepath.Join(etc, ".idemgate"), "no second journal")
	}
}
