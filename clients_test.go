package idemgate_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/gateway/mcp"
)

// TestClientsSpeakTheAnswerSchema: the TypeScript client's Answer interface
// and the Python client's Answer dataclass name exactly the members of the
// HTTP API's answer schema (the OpenAPI document's components.schemas.Answer,
// which is the MCP tools' output schema), and both know every next action.
func TestClientsSpeakTheAnswerSchema(t *testing.T) {
	t.Parallel()
	schema := mcp.AnswerSchema()
	var want []string
	for p := range schema.Properties {
		want = append(want, p)
	}
	slices.Sort(want)

	ts := read(t, "clients/typescript/src/index.d.ts")
	body := between(t, ts, "export interface Answer {", "\n}")
	tsFields := regexp.MustCompile(`(?m)^\s+([a-z_]+)\??:`).FindAllStringSubmatch(body, -1)
	require(t, names(tsFields), want, "clients/typescript/src/index.d.ts Answer")

	py := read(t, "clients/python/src/idemgate_client/client.py")
	body = between(t, py, "class Answer:", "@staticmethod")
	pyFields := regexp.MustCompile(`(?m)^    ([a-z_]+): `).FindAllStringSubmatch(body, -1)
	require(t, names(pyFields), want, "clients/python Answer")

	actions := schema.Properties["next_action"].Enum
	if len(actions) != 7 {
		t.Fatalf("next_action enum: %v", actions)
	}
	for _, a := range actions {
		q := `"` + a.(string) + `"`
		if !strings.Contains(ts, q) || !strings.Contains(py, q) {
			t.Errorf("next action %s missing from a client", q)
		}
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func between(t *testing.T, text, from, to string) string {
	t.Helper()
	_, after, ok := strings.Cut(text, from)
	if !ok {
		t.Fatalf("%q not found", from)
	}
	body, _, ok := strings.Cut(after, to)
	if !ok {
		t.Fatalf("%q not found after %q", to, from)
	}
	return body
}

func names(m [][]string) []string {
	var out []string
	for _, s := range m {
		out = append(out, s[1])
	}
	slices.Sort(out)
	return out
}

func require(t *testing.T, have, want []string, what string) {
	t.Helper()
	if !slices.Equal(have, want) {
		t.Errorf("%s names %v; the answer schema has %v", what, have, want)
	}
}
