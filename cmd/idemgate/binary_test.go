package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVersionCommand: `idemgate version` and `idemgate --version` print the
// version, the commit and the Go version from the build information.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out bytes.Buffer
		require.Equal(t, exitOK, run(context.Background(), args, &out, io.Discard), args)
		require.Regexp(t, `^idemgate \S+, commit \S+`, out.String())
		require.Contains(t, out.String(), runtime.Version())
	}
}

// TestMCPReportsTheStampedVersion: the version packaging stamps with
// -X main.version is what `idemgate version` prints and what the MCP server
// reports in serverInfo. (Not parallel: it sets the package's version.)
func TestMCPReportsTheStampedVersion(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	version = "v9.9.9-stamped"
	var out bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"version"}, &out, io.Discard))
	require.Contains(t, out.String(), "idemgate v9.9.9-stamped,")
	require.Equal(t, "v9.9.9-stamped", mcpOptions(Config{}, nil).Version)
}

// TestConfigFileSearch: the file is --config, else $IDEMGATE_CONFIG, else
// ./idemgate.yaml (or .yml), then <user config dir>/idemgate/config.yaml,
// then /etc/idemgate/config.yaml — never an extensionless ./idemgate, which
// is the binary itself when it is started from its own folder.
func TestConfigFileSearch(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	xdg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", xdg)
	t.Setenv("IDEMGATE_CONFIG", "")
	require.NoError(t, os.WriteFile("idemgate", []byte("\x7fELF\x02\x01\x01\x00: not yaml: [\n"), 0o755))
	c, err := loadConfig(flagsWith(t))
	require.NoError(t, err, "an extensionless ./idemgate is not a configuration file")
	require.Equal(t, "prod", c.Env)

	require.NoError(t, os.MkdirAll(filepath.Join(xdg, "idemgate"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(xdg, "idemgate", "config.yaml"), []byte("env: fromuser\n"), 0o600))
	c, err = loadConfig(flagsWith(t))
	require.NoError(t, err)
	require.Equal(t, "fromuser", c.Env, "~/.config/idemgate/config.yaml")

	require.NoError(t, os.WriteFile("idemgate.yml", []byte("env: fromyml\n"), 0o600))
	c, err = loadConfig(flagsWith(t))
	require.NoError(t, err)
	require.Equal(t, "fromyml", c.Env, "./idemgate.yml comes first")

	require.NoError(t, os.WriteFile("idemgate.yaml", []byte("env: fromyaml\n"), 0o600))
	c, err = loadConfig(flagsWith(t))
	require.NoError(t, err)
	require.Equal(t, "fromyaml", c.Env, "./idemgate.yaml before .yml")

	named := writeConfig(t, "env: fromenvvar\n")
	t.Setenv("IDEMGATE_CONFIG", named)
	c, err = loadConfig(flagsWith(t))
	require.NoError(t, err)
	require.Equal(t, "fromenvvar", c.Env, "$IDEMGATE_CONFIG before the search")
	c, err = loadConfig(flagsWith(t, "--config", writeConfig(t, "env: fromflag\n")))
	require.NoError(t, err)
	require.Equal(t, "fromflag", c.Env, "--config first")
	require.Equal(t, []string{"idemgate.yaml", "idemgate.yml",
		filepath.Join(xdg, "idemgate", "config.yaml"), filepath.Join(xdg, "idemgate", "config.yml"),
		"/etc/idemgate/config.yaml", "/etc/idemgate/config.yml"}, configCandidates())
}

// TestBuiltBinary builds the idemgate binary as a user does and runs it
// from its own folder: it does not take itself for its configuration, and
// `idemgate version` reports the build information `go version -m` reads.
func TestBuiltBinary(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "idemgate"), ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	env := append(os.Environ(), "IDEMGATE_CONFIG=", "XDG_CONFIG_HOME="+t.TempDir(), "IDEMGATE_DATA_DIR="+filepath.Join(dir, "data"))

	status := exec.Command("./idemgate", "migrate", "status")
	status.Dir, status.Env = dir, env
	out, err = status.CombinedOutput()
	require.NoError(t, err, "./idemgate from its own folder: %s", out)
	require.Contains(t, string(out), "sqlite journal: pending=true")

	version := exec.Command("./idemgate", "version")
	version.Dir, version.Env = dir, env
	got, err := version.Output()
	require.NoError(t, err)
	meta, err := exec.Command("go", "version", "-m", filepath.Join(dir, "idemgate")).Output()
	require.NoError(t, err)
	goVersion := regexp.MustCompile(`: (go\S+)`).FindSubmatch(meta)
	require.NotNil(t, goVersion, "%s", meta)
	commit := "unknown"
	if m := regexp.MustCompile(`\bvcs\.revision=(\S+)`).FindSubmatch(meta); m != nil {
		commit = string(m[1])
	}
	modVersion := regexp.MustCompile(`\tmod\t\S+\t(\S+)`).FindSubmatch(meta)
	require.NotNil(t, modVersion, "%s", meta)
	line := strings.TrimSpace(string(got))
	require.True(t, strings.HasPrefix(line, "idemgate "+string(modVersion[1])+", commit "+commit), "%q vs go version -m:\n%s", line, meta)
	require.Contains(t, line, string(goVersion[1]))
}
