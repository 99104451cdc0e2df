package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// sandboxInfo is what `idemgate sandbox` printed: each emulator's admin base
// URL, and the adapters block for the daemons' configuration.
type sandboxInfo struct {
	urls     map[string]string
	adapters string // the YAML lines under "adapters:", indented two spaces
	secrets  []string
}

var emulatorLine = regexp.MustCompile(`^([a-z0-9]+)  (http://127\.0\.0\.1:\d+)$`)
var credLine = regexp.MustCompile(`\s(\w+)=(\S+)`)

// readSandbox parses the sandbox's banner from r until "Serving".
func readSandbox(r io.Reader) (sandboxInfo, error) {
	info := sandboxInfo{urls: map[string]string{}}
	sc := bufio.NewScanner(r)
	inAdapters := false
	var b strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if m := emulatorLine.FindStringSubmatch(line); m != nil {
			info.urls[m[1]] = m[2]
		}
		if strings.Contains(line, "test credentials") {
			for _, m := range credLine.FindAllStringSubmatch(line, -1) {
				if m[1] != "user_id" && m[1] != "key_field_id" && m[1] != "user" && m[1] != "shop_id" && m[1] != "terminal_key" {
					info.secrets = append(info.secrets, m[2])
				}
			}
		}
		switch {
		case line == "adapters:":
			inAdapters = true
		case strings.HasPrefix(line, "Serving"):
			info.adapters = b.String()
			if len(info.urls) == 0 || info.adapters == "" {
				return info, errors.New("sandbox banner without emulators or adapters block")
			}
			return info, nil
		case inAdapters && strings.HasPrefix(line, "  "):
			b.WriteString(line + "\n")
		}
	}
	return info, fmt.Errorf("sandbox ended before serving: %v", sc.Err())
}
