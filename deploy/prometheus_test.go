package deploy_test

import (
	"os"
	"os/exec"
	"testing"
)

// promtool finds Prometheus' rule checker (Debian's prometheus package;
// scripts/test installs it when missing). Without it the test skips
// locally and fails under CI.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found: install Debian's prometheus package (scripts/test does when run as root)")
		}
		t.Skip("promtool not found (Debian's prometheus package); CI fails here instead of skipping")
	}
	return p
}

// TestAlertRules checks the alerting rules with promtool and runs their
// unit cases: each alert fires on the series that should raise it, with
// its annotations, and stays quiet on healthy series.
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "prometheus/alerts.yaml"},
		{"test", "rules", "prometheus/alerts_test.yaml"},
	} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}
