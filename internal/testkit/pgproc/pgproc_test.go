package pgproc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestInitPrimaryOutOfPostgresReach: run as root under a folder closed to
// others (a root-only TMPDIR), the server runs in a folder of its own that
// the postgres user can reach, linked from where it was asked for; Remove
// takes that folder away and leaves the log where it was asked for.
func TestInitPrimaryOutOfPostgresReach(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root runs PostgreSQL as the postgres user")
	}
	closed := t.TempDir()
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	asked := filepath.Join(closed, "pg")
	s, err := InitPrimary(asked, "reach")
	if err != nil {
		t.Fatal(err)
	}
	ran := s.Dir
	t.Cleanup(func() { _ = s.Remove(); _ = os.RemoveAll(ran) })
	if ran == asked || !strings.HasPrefix(ran, "/tmp/") && !strings.HasPrefix(ran, "/var/tmp/") {
		t.Fatalf("the server runs in %s, want a folder of its own under /tmp", ran)
	}
	if link, err := os.Readlink(asked); err != nil || link != ran {
		t.Fatalf("%s links to %q (%v), want %s", asked, link, err, ran)
	}
	out, err := s.Run("psql", "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "postgres", "-d", "reach", "-Atc", "select 1")
	if err != nil || strings.TrimSpace(out) != "1" {
		t.Fatalf("psql: %v: %s", err, out)
	}

	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ran); !os.IsNotExist(err) {
		t.Fatalf("%s is left behind: %v", ran, err)
	}
	fi, err := os.Lstat(asked)
	if err != nil || !fi.IsDir() {
		t.Fatalf("%s: %v, want a folder holding the log", asked, err)
	}
	if b, err := os.ReadFile(filepath.Join(asked, "postgres.log")); err != nil || len(b) == 0 {
		t.Fatalf("the log is not kept where it was asked for: %v", err)
	}
}
