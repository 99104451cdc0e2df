// Package deploy_test lints the operational files CI cannot run: there is no
// container engine on CI machines, so the Dockerfile and compose.yaml are
// checked here for the properties operators rely on; scripts/package builds
// the binary and the .deb and verifies the systemd unit with systemd-analyze.
package deploy_test

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/idemgate/idemgate/worker"
)

// unit reads a systemd unit into section → key → values (keys may repeat).
func unit(t *testing.T, path string) map[string]map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string][]string{}
	section := ""
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			out[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a key=value line in a section: %q", path, n, line)
			}
			out[section][k] = append(out[section][k], v)
		}
	}
	return out
}

func one(t *testing.T, u map[string]map[string][]string, section, key string) string {
	t.Helper()
	v := u[section][key]
	if len(v) != 1 {
		t.Fatalf("[%s] %s: want exactly one value, have %q", section, key, v)
	}
	return v[0]
}

func TestSystemdUnit(t *testing.T) {
	u := unit(t, "systemd/idemgate.service")
	if got := one(t, u, "Service", "RestartPreventExitStatus"); got != "78" {
		t.Errorf("RestartPreventExitStatus=%s: a refused configuration (exit 78) must not be restarted", got)
	}
	stop, err := time.ParseDuration(one(t, u, "Service", "TimeoutStopSec"))
	if err != nil {
		t.Fatalf("TimeoutStopSec: %v", err)
	}
	drain := worker.Config{}.WithDefaults().ShutdownTimeout
	if stop <= drain+5*time.Second {
		t.Errorf("TimeoutStopSec=%v must leave the daemon its drain (worker.shutdown_timeout %v) plus slack before SIGKILL", stop, drain)
	}
	if user := one(t, u, "Service", "User"); user == "" || user == "root" {
		t.Errorf("User=%q: the daemon runs as its own system user", user)
	}
	exec := one(t, u, "Service", "ExecStart")
	if !strings.HasPrefix(exec, "/usr/bin/idemgate run --config /etc/idemgate/idemgate.yaml") {
		t.Errorf("ExecStart=%s: want the packaged binary and config paths", exec)
	}
	for _, k := range []string{"NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp", "StateDirectory"} {
		if len(u["Service"][k]) == 0 {
			t.Errorf("[Service] %s missing", k)
		}
	}
	if got := one(t, u, "Install", "WantedBy"); got != "multi-user.target" {
		t.Errorf("WantedBy=%s", got)
	}
}

func TestNFPMPackagesWhatTheUnitRuns(t *testing.T) {
	var cfg struct {
		Name     string `yaml:"name"`
		Contents []struct {
			Src, Dst, Type string
		} `yaml:"contents"`
		Scripts map[string]string `yaml:"scripts"`
	}
	readYAML(t, "nfpm.yaml", &cfg)
	dst := map[string]string{}
	for _, c := range cfg.Contents {
		dst[c.Dst] = c.Src
		if strings.HasPrefix(c.Src, "dist/") {
			// Built by scripts/package before nfpm runs.
			pkg, err := os.ReadFile("../scripts/package")
			if err != nil || !strings.Contains(string(pkg), "bin="+c.Src) {
				t.Errorf("nfpm packs %s, which scripts/package does not build (err %v)", c.Src, err)
			}
			continue
		}
		if c.Src != "" {
			if _, err := os.Stat("../" + c.Src); err != nil {
				t.Errorf("nfpm source %s: %v", c.Src, err)
			}
		}
		if strings.HasPrefix(c.Dst, "/etc/") && c.Type != "config|noreplace" {
			t.Errorf("%s: files under /etc are config|noreplace, so upgrades keep the operator's edits", c.Dst)
		}
	}
	for _, p := range []string{"/usr/bin/idemgate", "/lib/systemd/system/idemgate.service", "/etc/idemgate/idemgate.yaml", "/var/lib/idemgate"} {
		if _, ok := dst[p]; !ok {
			t.Errorf("the package does not install %s", p)
		}
	}
	if dst["/lib/systemd/system/idemgate.service"] != "deploy/systemd/idemgate.service" {
		t.Errorf("the package installs another unit than deploy/systemd/idemgate.service")
	}
	for _, s := range cfg.Scripts {
		if _, err := os.Stat("../" + s); err != nil {
			t.Errorf("nfpm script %s: %v", s, err)
		}
	}
	post, err := os.ReadFile("../" + cfg.Scripts["postinstall"])
	if err != nil || !strings.Contains(string(post), "adduser --system") {
		t.Errorf("postinstall must create the system user the unit runs as (err %v)", err)
	}
}

func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(text, -1)
	if len(froms) < 2 {
		t.Fatalf("want a multi-stage build, have %d FROM lines", len(froms))
	}
	final := froms[len(froms)-1][1]
	if final != "scratch" && !strings.HasPrefix(final, "gcr.io/distroless/static") {
		t.Errorf("final stage FROM %s: want scratch or distroless/static (a static binary needs no OS)", final)
	}
	if !strings.Contains(text, "CGO_ENABLED=0") {
		t.Error("the binary must be built static (CGO_ENABLED=0)")
	}
	users := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindAllStringSubmatch(text, -1)
	if len(users) == 0 || strings.HasPrefix(users[len(users)-1][1], "root") || strings.HasPrefix(users[len(users)-1][1], "0") {
		t.Errorf("the image must run as a non-root USER, have %v", users)
	}
	if !strings.Contains(text, `ENTRYPOINT ["/usr/bin/idemgate"]`) {
		t.Error("ENTRYPOINT must be the binary")
	}
	pkg, err := os.ReadFile("../scripts/package")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "-X main.version=") || !strings.Contains(string(pkg), "-X main.version=") {
		t.Error("the Dockerfile and scripts/package must stamp the version the same way (-X main.version=)")
	}
}

func TestComposeStack(t *testing.T) {
	var c struct {
		Services map[string]struct {
			Image       string         `yaml:"image"`
			Command     []string       `yaml:"command"`
			Volumes     []string       `yaml:"volumes"`
			Environment map[string]any `yaml:"environment"`
			StopGrace   string         `yaml:"stop_grace_period"`
		} `yaml:"services"`
	}
	readYAML(t, "compose.yaml", &c)
	var nats, daemons []string
	for name := range c.Services {
		switch {
		case strings.HasPrefix(name, "nats-"):
			nats = append(nats, name)
		case strings.HasPrefix(name, "idemgate-"):
			daemons = append(daemons, name)
		}
	}
	slices.Sort(nats)
	if len(nats) != 3 {
		t.Fatalf("want a 3-node NATS cluster, have %v", nats)
	}
	if len(daemons) < 2 {
		t.Errorf("want at least 2 daemon replicas, have %v", daemons)
	}
	for _, n := range []string{"postgres", "sandbox"} {
		if _, ok := c.Services[n]; !ok {
			t.Errorf("service %s missing", n)
		}
	}
	for _, n := range nats {
		cmd := strings.Join(c.Services[n].Command, " ")
		if !strings.Contains(cmd, "-js") || !strings.Contains(cmd, "--cluster_name idemgate") {
			t.Errorf("%s: JetStream in cluster idemgate expected: %s", n, cmd)
		}
		for _, peer := range nats {
			if peer != n && !strings.Contains(cmd, "nats://"+peer+":6222") {
				t.Errorf("%s does not route to %s", n, peer)
			}
		}
	}
	for _, d := range daemons {
		s := c.Services[d]
		if !slices.Contains(s.Volumes, "./compose/idemgate.yaml:/etc/idemgate/idemgate.yaml:ro") {
			t.Errorf("%s does not mount deploy/compose/idemgate.yaml", d)
		}
		grace, err := time.ParseDuration(s.StopGrace)
		if err != nil || grace <= (worker.Config{}).WithDefaults().ShutdownTimeout {
			t.Errorf("%s: stop_grace_period %q must exceed the drain timeout", d, s.StopGrace)
		}
	}
	var cfg struct {
		NATS struct {
			URL      string `yaml:"url"`
			Replicas int    `yaml:"replicas"`
		} `yaml:"nats"`
	}
	readYAML(t, "compose/idemgate.yaml", &cfg)
	for _, n := range nats {
		if !strings.Contains(cfg.NATS.URL, "nats://"+n+":4222") {
			t.Errorf("the daemons' nats.url does not name %s: %s", n, cfg.NATS.URL)
		}
	}
	if cfg.NATS.Replicas != len(nats) {
		t.Errorf("nats.replicas %d on a %d-node cluster", cfg.NATS.Replicas, len(nats))
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
