package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readme returns the repository's README.md.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	return string(b)
}

// docPage returns a page of the repository's docs/ folder.
func docPage(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../docs", name))
	require.NoError(t, err)
	return string(b)
}

// readmeSection returns the text under a "## title" heading of a page, up
// to the next heading of that level.
func readmeSection(t *testing.T, doc, title string) string {
	t.Helper()
	_, after, ok := strings.Cut(doc, "\n## "+title+"\n")
	require.True(t, ok, "the page has a section %q", title)
	if i := strings.Index(after, "\n## "); i >= 0 {
		after = after[:i]
	}
	return after
}

// codeBlocks returns the bodies of the fenced blocks of a language.
func codeBlocks(doc, lang string) []string {
	var out []string
	for _, part := range strings.Split(doc, "```"+lang+"\n")[1:] {
		body, _, _ := strings.Cut(part, "```")
		out = append(out, body)
	}
	return out
}

// shellCommands joins continued lines (a trailing backslash) and drops
// comments and blank lines.
func shellCommands(block string) []string {
	var cmds []string
	var cur strings.Builder
	for _, line := range strings.Split(block, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur.WriteString(strings.TrimSuffix(trimmed, `\`) + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmds = append(cmds, stripComment(cur.String()))
		cur.Reset()
	}
	return cmds
}

// stripComment removes a trailing # comment outside quotes.
func stripComment(s string) string {
	var quote rune
	for i, c := range s {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || s[i-1] == ' '):
			return strings.TrimSpace(s[:i])
		}
	}
	return strings.TrimSpace(s)
}

// shellWords splits a command as sh would for the quoting the README uses:
// single and double quotes, no expansion.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, c := range s {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(c)
			in = true
		}
	}
	require.Zero(t, quote, "unbalanced quotes in %q", s)
	if in {
		words = append(words, cur.String())
	}
	return words
}

// TestOperatingCommandsExist: every command of the commands table in
// docs/operating.md is a command of the binary, with the flags the table
// shows.
func TestOperatingCommandsExist(t *testing.T) {
	t.Parallel()
	table := readmeSection(t, docPage(t, "operating.md"), "Commands")
	root := newRoot(io.Discard, io.Discard)
	root.InitDefaultVersionFlag() // as Execute does
	spans := regexp.MustCompile("`([^`]+)`")
	word := regexp.MustCompile(`^[a-z][a-z-]*$`)
	rows := 0
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `idemgate") {
			continue
		}
		rows++
		first := strings.Split(line, "|")[1]
		var parent []string
		for _, m := range spans.FindAllStringSubmatch(first, -1) {
			toks := strings.Fields(m[1])
			var path, flags []string
			if toks[0] == "idemgate" {
				toks = toks[1:]
			} else if len(parent) > 0 {
				// "`idemgate migrate up` / `status`": a sibling of the previous.
				path = append(path, parent[:len(parent)-1]...)
			}
			args := true
			for _, tok := range toks {
				tok = strings.Trim(tok, "[]")
				switch {
				case strings.HasPrefix(tok, "--"):
					flags = append(flags, strings.TrimPrefix(strings.SplitN(tok, "=", 2)[0], "--"))
					args = false
				case args && word.MatchString(tok):
					path = append(path, tok)
				default:
					args = false
				}
			}
			if len(path) == 0 {
				// A root flag such as `--version`.
				for _, f := range flags {
					require.NotNil(t, root.Flags().Lookup(f), "idemgate --%s (docs: %s)", f, m[1])
				}
				continue
			}
			parent = path
			cmd, rest, err := root.Find(path)
			require.NoError(t, err, "the docs name idemgate %s", strings.Join(path, " "))
			require.Empty(t, rest, "the docs name idemgate %s", strings.Join(path, " "))
			require.Equal(t, "idemgate "+strings.Join(path, " "), cmd.CommandPath(), "the docs name idemgate %s", strings.Join(path, " "))
			for _, f := range flags {
				require.NotNil(t, cmd.Flags().Lookup(f), "idemgate %s --%s (docs)", strings.Join(path, " "), f)
			}
		}
	}
	require.GreaterOrEqual(t, rows, 10, "the Operations table was found")
}

// TestReadmeExamplesUseOneEventIDPerIntent: every command the README and
// the docs send has its own event id (JetStream drops a second command with
// an event id it holds, within its duplicate window), and a results
// subscription is shown before the publish whose result it should see.
func TestReadmeExamplesUseOneEventIDPerIntent(t *testing.T) {
	t.Parallel()
	doc := readme(t) + docPage(t, "agents.md") + docPage(t, "operating.md")
	eventID := regexp.MustCompile(`(?:--event[ =]|"event_id":\s*"|Nats-Msg-Id:)([A-Za-z0-9._~:-]+)`)
	usedBy := map[string]string{}
	for _, block := range codeBlocks(doc, "sh") {
		sub, pub := -1, -1
		for i, cmd := range shellCommands(block) {
			ids := map[string]bool{}
			for _, m := range eventID.FindAllStringSubmatch(cmd, -1) {
				ids[m[1]] = true
			}
			for id := range ids {
				prev, seen := usedBy[id]
				require.False(t, seen, "event id %s is sent twice:\n  %s\n  %s", id, prev, cmd)
				usedBy[id] = cmd
			}
			if w := strings.Fields(cmd); len(w) > 0 && w[0] == "nats" {
				if sub < 0 && strings.Contains(cmd, " sub ") {
					sub = i
				}
				if pub < 0 && strings.Contains(cmd, " pub ") {
					pub = i
				}
			}
		}
		if pub >= 0 {
			require.True(t, sub >= 0 && sub < pub, "subscribe to the results before publishing:\n%s", block)
		}
	}
	require.GreaterOrEqual(t, len(usedBy), 3, "the docs' commands were found")
}

func TestShellWords(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"publish", "--payload", `{"a":"b c"}`, "--wait"},
		shellWords(t, `publish --payload '{"a":"b c"}' --wait`))
	require.Equal(t, []string{"go", "run", "x"}, shellWords(t, stripComment("go run x   # terminal 2")))
}
