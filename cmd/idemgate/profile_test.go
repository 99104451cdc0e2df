package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDaemonGC: without GOGC the daemon collects at 300; with GOGC set the
// runtime's reading of it stands.
func TestDaemonGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	if v, ok := os.LookupEnv("GOGC"); ok {
		t.Cleanup(func() { os.Setenv("GOGC", v) })
	}
	require.NoError(t, os.Unsetenv("GOGC"))
	setDaemonGC()
	require.Equal(t, daemonGCPercent, debug.SetGCPercent(100))

	t.Setenv("GOGC", "100")
	setDaemonGC()
	require.Equal(t, 100, debug.SetGCPercent(100), "GOGC set: left alone")
}

// TestStartProfile: with a folder, a CPU and an allocation profile that
// pprof reads; without one, nothing; an unusable folder is said on stderr
// and the process goes on. (A profile is gzipped protocol buffers.)
func TestStartProfile(t *testing.T) {
	dir := t.TempDir()
	var stderr bytes.Buffer
	stop := startProfile(dir, &stderr)
	sink := 0
	for i := range 1 << 20 {
		sink += len(make([]byte, i%64))
	}
	_ = sink
	stop()
	require.Empty(t, stderr.String())
	for _, name := range []string{"cpu.pprof", "allocs.pprof"} {
		f, err := os.Open(filepath.Join(dir, name))
		require.NoError(t, err)
		zr, err := gzip.NewReader(f)
		require.NoError(t, err, name)
		b, err := io.ReadAll(zr)
		f.Close()
		require.NoError(t, err, name)
		require.NotEmpty(t, b, name)
	}

	startProfile("", &stderr)()
	require.Empty(t, stderr.String())

	startProfile(filepath.Join(dir, "missing"), &stderr)()
	require.Contains(t, stderr.String(), "idemgate: no profile:")
}
