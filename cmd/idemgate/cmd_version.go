package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
)

// version is stamped by packaging (-ldflags "-X main.version=…", as
// scripts/package and the Dockerfile do); it wins over the module version.
var version string

// buildInfo is what the binary knows about its own build.
type buildInfo struct {
	Version  string // module version, "(devel)" for a local build
	Commit   string // VCS revision, "unknown" when not stamped
	Modified bool   // built from a work tree with uncommitted changes
	Go       string // Go version that built it
}

// readBuildInfo reads the build information the Go toolchain stamps into
// every binary (module version, VCS revision with -buildvcs, Go version).
func readBuildInfo() buildInfo {
	b := buildInfo{Version: "(devel)", Commit: "unknown", Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	switch {
	case version != "":
		b.Version = version
	case ok && bi.Main.Version != "":
		b.Version = bi.Main.Version
	}
	if !ok {
		return b
	}
	if bi.GoVersion != "" {
		b.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// versionLine is what `idemgate version` and `idemgate --version` print.
func versionLine() string {
	b := readBuildInfo()
	commit := b.Commit
	if b.Modified {
		commit += " (modified)"
	}
	return fmt.Sprintf("idemgate %s, commit %s, %s %s/%s", b.Version, commit, b.Go, runtime.GOOS, runtime.GOARCH)
}

func versionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit it was built from and the Go version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(stdout, versionLine())
			return err
		},
	}
}

// buildInfoGauge is idemgate_build_info{version,commit,go}, always 1: the
// build a scrape came from.
func buildInfoGauge() prometheus.Collector {
	b := readBuildInfo()
	commit := b.Commit
	if b.Modified {
		commit += "-modified"
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "idemgate", Name: "build_info",
		Help: "The build of this binary: version, VCS commit and Go version; always 1."}, []string{"version", "commit", "go"})
	g.WithLabelValues(b.Version, commit, b.Go).Set(1)
	return g
}
