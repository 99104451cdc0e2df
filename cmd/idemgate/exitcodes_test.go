package main

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestUsageErrorsExit2: an unknown command (at the root or below it), an
// unknown flag and a wrong number of arguments exit 2 and say what was
// wrong; a command made of subcommands, given none, prints its help.
func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"unknown command":              {[]string{"frob"}, `unknown command "frob" for "idemgate"`},
		"unknown command, a near name": {[]string{"migrat"}, "did you mean migrate?"},
		"unknown subcommand":           {[]string{"migrate", "sideways"}, `unknown command "sideways" for "idemgate migrate"`},
		"unknown flag":                 {[]string{"trace", "--bogus"}, "unknown flag: --bogus"},
		"resolve without a key":        {[]string{"resolve"}, "accepts 1 arg(s), received 0"},
		"resolve with two keys":        {[]string{"resolve", "a", "b"}, "accepts 1 arg(s), received 2"},
		"approve without a key":        {[]string{"approve"}, "accepts 1 arg(s), received 0"},
		"an argument to version":       {[]string{"version", "now"}, `unknown command "now" for "idemgate version"`},
		"an argument to reconcile":     {[]string{"reconcile", "all"}, `unknown command "all" for "idemgate reconcile"`},
		"trace with two keys":          {[]string{"trace", "a", "b"}, "trace needs one KEY (or --unresolved), got 2 arguments"},
		"trace a key and --unresolved": {[]string{"trace", "--unresolved", "a"}, "trace takes a KEY or --unresolved, not both"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var out, errb bytes.Buffer
			code := run(context.Background(), tc.args, &out, &errb)
			require.Equal(t, exitUsage, code, errb.String())
			require.Contains(t, errb.String(), tc.want)
		})
	}
	var out, errb bytes.Buffer
	require.Equal(t, exitOK, run(context.Background(), []string{"migrate"}, &out, &errb), errb.String())
	require.Contains(t, out.String(), "Available Commands:", "migrate alone shows its subcommands")
}

// TestTraceWithoutKeyOpensNoJournal: trace without a KEY is refused before
// any journal is touched: no SQLite file (nor its folder) is created, and a
// PostgreSQL URL that nothing answers is never dialled — the usage error
// comes at once, not a connection error.
func TestTraceWithoutKeyOpensNoJournal(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"trace", "--env", "test", "--data-dir", dir}, &out, &errb)
	require.Equal(t, exitUsage, code, errb.String())
	require.Contains(t, errb.String(), "trace needs one KEY (or --unresolved), got 0 arguments")
	_, err := os.Stat(dir)
	require.True(t, os.IsNotExist(err), "no data folder, no journal: %v", err)

	// An existing, empty data folder stays empty.
	require.NoError(t, os.Mkdir(dir, 0o700))
	errb.Reset()
	require.Equal(t, exitUsage, run(context.Background(), []string{"trace", "--env", "test", "--data-dir", dir}, &out, &errb), errb.String())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "trace without a key created nothing")

	// A PostgreSQL journal nothing listens for: a listener that is closed
	// at once leaves a port that refuses connections.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	errb.Reset()
	start := time.Now()
	code = run(context.Background(), []string{"trace", "--env", "test", "--journal-url", "postgres://nobody@" + addr + "/none?sslmode=disable"}, &out, &errb)
	require.Equal(t, exitUsage, code, errb.String())
	require.NotContains(t, errb.String(), addr, "the journal was not dialled")
	require.Less(t, time.Since(start), 5*time.Second)
}

// TestExitCodesTable: the exit-code table of docs/operating.md lists every
// exit* constant of main.go with its value, and nothing else.
func TestExitCodesTable(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, 0)
	require.NoError(t, err)
	var consts []int
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Values) != len(vs.Names) {
			return true
		}
		for i, name := range vs.Names {
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if !strings.HasPrefix(name.Name, "exit") || !ok || lit.Kind != token.INT {
				continue
			}
			v, err := strconv.Atoi(lit.Value)
			require.NoError(t, err)
			consts = append(consts, v)
		}
		return true
	})
	require.GreaterOrEqual(t, len(consts), 10, "the exit constants were found")

	section := readmeSection(t, docPage(t, "operating.md"), "Shutdown and exit codes")
	row := regexp.MustCompile(`(?m)^\| (\d+) \| [^|]+ \| [^|]+ \|$`)
	var documented []int
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		v, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		documented = append(documented, v)
	}
	slices.Sort(consts)
	slices.Sort(documented)
	require.Equal(t, consts, documented, "docs/operating.md's exit codes are main.go's constants")
}
