package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// stream is what `go test -json` printed for two packages: one passing with a
// skip, one failing, and a package without tests.
const stream = `{"Action":"start","Package":"example.com/m/a"}
{"Action":"run","Package":"example.com/m/a","Test":"TestOK"}
{"Action":"output","Package":"example.com/m/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestOK","Output":"    a_test.go:9: chatter of a passing test\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestOK","Output":"--- PASS: TestOK (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/a","Test":"TestOK"}
{"Action":"run","Package":"example.com/m/a","Test":"TestSlow"}
{"Action":"output","Package":"example.com/m/a","Test":"TestSlow","Output":"=== RUN   TestSlow\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestSlow","Output":"    a_test.go:12: too slow under -race\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestSlow","Output":"--- SKIP: TestSlow (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/a","Test":"TestSlow"}
{"Action":"run","Package":"example.com/m/a","Test":"TestParent/sub"}
{"Action":"output","Package":"example.com/m/a","Test":"TestParent/sub","Output":"    a_test.go:20: no database here\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestParent/sub","Output":"    --- SKIP: TestParent/sub (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/a","Test":"TestParent/sub"}
{"Action":"output","Package":"example.com/m/a","Output":"PASS\n"}
{"Action":"output","Package":"example.com/m/a","Output":"ok  \texample.com/m/a\t0.01s\n"}
{"Action":"pass","Package":"example.com/m/a"}
{"Action":"run","Package":"example.com/m/b","Test":"TestBroken"}
{"Action":"output","Package":"example.com/m/b","Test":"TestBroken","Output":"=== RUN   TestBroken\n"}
{"Action":"output","Package":"example.com/m/b","Test":"TestBroken","Output":"    b_test.go:7: want 1, got 2\n"}
{"Action":"output","Package":"example.com/m/b","Test":"TestBroken","Output":"--- FAIL: TestBroken (0.00s)\n"}
{"Action":"fail","Package":"example.com/m/b","Test":"TestBroken"}
{"Action":"run","Package":"example.com/m/b","Test":"TestHangs"}
{"Action":"output","Package":"example.com/m/b","Test":"TestHangs","Output":"    b_test.go:30: waiting\n"}
{"Action":"output","Package":"example.com/m/b","Output":"panic: test timed out after 1s\n"}
{"Action":"output","Package":"example.com/m/b","Output":"FAIL\texample.com/m/b\t1.00s\n"}
{"Action":"fail","Package":"example.com/m/b"}
{"Action":"output","Package":"example.com/m/c","Output":"?   \texample.com/m/c\t[no test files]\n"}
{"Action":"skip","Package":"example.com/m/c"}
{"ImportPath":"example.com/m/d [example.com/m/d.test]","Action":"build-output","Output":"d/d.go:3:1: syntax error\n"}
go: some line that is not JSON
`

func TestReport(t *testing.T) {
	t.Parallel()
	allow, err := parseAllowList(strings.NewReader(`
# comment
a TestSlow   # runs in the no-race step
`), "example.com/m")
	require.NoError(t, err)
	require.Equal(t, []allowed{{"example.com/m/a", "TestSlow", "runs in the no-race step"}}, allow)

	var out strings.Builder
	code := run(strings.NewReader(stream), &out, allow, true, false)
	got := out.String()
	require.Equal(t, 1, code, "a skip off the allow-list fails under CI")

	// Plain go test's lines, and the output of failing tests only.
	require.Contains(t, got, "ok  \texample.com/m/a\t0.01s\n")
	require.Contains(t, got, "    b_test.go:7: want 1, got 2\n--- FAIL: TestBroken (0.00s)\n")
	require.Contains(t, got, "FAIL\texample.com/m/b\t1.00s\n")
	require.Contains(t, got, "    b_test.go:30: waiting\n", "a test running when its package died shows its output")
	require.Contains(t, got, "?   \texample.com/m/c\t[no test files]\n")
	require.Contains(t, got, "d/d.go:3:1: syntax error\n")
	require.Contains(t, got, "go: some line that is not JSON\n")
	require.NotContains(t, got, "chatter of a passing test")
	require.NotContains(t, got, "=== RUN")
	require.NotContains(t, got, "PASS\n")

	// The summary: failures, then every skip with its reasons.
	require.Contains(t, got, "  FAIL example.com/m/b TestBroken\n")
	require.Contains(t, got, "2 skipped:\n")
	require.Contains(t, got, "  SKIP example.com/m/a TestParent/sub [NOT ALLOWED]\n       test says: a_test.go:20: no database here\n")
	require.Contains(t, got, "  SKIP example.com/m/a TestSlow [allowed]\n       test says: a_test.go:12: too slow under -race\n       allowed:   runs in the no-race step\n")
	require.Contains(t, got, "1 skipped test(s) not on the allow-list")

	// Outside CI the same skips are listed, and do not fail.
	out.Reset()
	require.Equal(t, 0, run(strings.NewReader(stream), &out, allow, false, false))
	require.Contains(t, out.String(), "[NOT ALLOWED]")

	// All allowed: CI passes.
	allow = append(allow, allowed{"example.com/m/a", "TestParent/sub", "no database in this test"})
	out.Reset()
	require.Equal(t, 0, run(strings.NewReader(stream), &out, allow, true, false))

	out.Reset()
	require.Equal(t, 0, run(strings.NewReader(`{"Action":"pass","Package":"x"}`+"\n"), &out, nil, true, false))
	require.Contains(t, out.String(), "no test skipped")
}

func TestStaleAllowEntries(t *testing.T) {
	t.Parallel()
	allow := []allowed{
		{"example.com/m/a", "TestSlow", "runs in the no-race step"},
		{"example.com/m/a", "TestParent/sub", "no database in this test"},
		{"example.com/m/a", "TestOK", "sometimes skips"},
		{"example.com/m/a", "TestRemovedLongAgo", "an open defect"},
	}
	var out strings.Builder
	require.Equal(t, 1, run(strings.NewReader(stream), &out, allow, true, true),
		"under CI a whole run fails on an entry whose test never ran")
	require.Contains(t, out.String(), "allow-list names example.com/m/a TestRemovedLongAgo, which did not run: remove the entry\n")
	require.NotContains(t, out.String(), "names example.com/m/a TestOK", "a test that ran and passed is not stale")

	out.Reset()
	require.Equal(t, 0, run(strings.NewReader(stream), &out, allow, true, false),
		"a partial run (scripts/test with arguments) cannot tell a stale entry")
	require.NotContains(t, out.String(), "did not run")

	out.Reset()
	require.Equal(t, 0, run(strings.NewReader(stream), &out, allow, false, true), "outside CI it is reported only")
	require.Contains(t, out.String(), "TestRemovedLongAgo, which did not run")
}

func TestAllowListNeedsReasons(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"a TestX\n", "a TestX #\n", "a # reason\n", "a TestX extra # reason\n"} {
		_, err := parseAllowList(strings.NewReader(bad), "m")
		require.Error(t, err, "%q", bad)
	}
	got, err := parseAllowList(strings.NewReader(". TestRoot # at the module root\n"), "m")
	require.NoError(t, err)
	require.Equal(t, []allowed{{"m", "TestRoot", "at the module root"}}, got)
}
