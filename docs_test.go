package idemgate_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docFiles are the README and every page of docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md", "CONTRIBUTING.md"}, pages...)
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile("(?m)^#{1,6} (.+)$")
	fence     = regexp.MustCompile("(?s)```.*?```")
)

// anchors are the heading anchors a Markdown page gets, as GitHub makes
// them: lower case, punctuation dropped, spaces as hyphens.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(fence.ReplaceAllString(doc, ""), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 0x7f && r != '→':
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// TestDocLinksResolve: every relative link of the README and the docs
// names a file of the repository, and every #anchor a heading of the page
// it points into.
func TestDocLinksResolve(t *testing.T) {
	checked := 0
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		doc := fence.ReplaceAllString(string(b), "")
		for _, m := range mdLink.FindAllStringSubmatch(doc, -1) {
			link := m[1]
			if strings.HasPrefix(link, "http://") || strings.HasPrefix(link, "https://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			checked++
			target, anchor, _ := strings.Cut(link, "#")
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), target)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s links to %s: %v", file, link, err)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			page, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s links to %s: %v", file, link, err)
				continue
			}
			if !anchors(string(page))[anchor] {
				t.Errorf("%s links to %s: %s has no heading #%s", file, link, path, anchor)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d links found: the pages were not read", checked)
	}
}

// mdName is a Markdown file's name as prose or a link mentions it.
var mdName = regexp.MustCompile(`[A-Za-z0-9_./-]+\.md\b`)

// written are the reports the project's tools write at run time (the
// soak's), named by the docs though no checkout holds them.
var written = map[string]bool{"soak-report.md": true, "recheck-report.md": true}

// TestDocsCiteOnlyTheRepository: every Markdown file the README and the
// docs name exists in the repository (a page never sends the reader to
// notes they cannot open), and no page leans on an unnamed source.
func TestDocsCiteOnlyTheRepository(t *testing.T) {
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range mdName.FindAllString(string(b), -1) {
			if strings.Contains(name, "://") || written[filepath.Base(name)] {
				continue
			}
			if !existsFrom(file, name) {
				t.Errorf("%s names %s, which is not in the repository", file, name)
			}
		}
		if strings.Contains(string(b), "the article") {
			t.Errorf("%s cites \"the article\": say what it teaches in the page's own words", file)
		}
	}
}

// existsFrom says whether name, as written in file, is a file of the
// repository: relative to file's folder, or to the repository's root.
func existsFrom(file, name string) bool {
	name = strings.TrimPrefix(name, "./")
	for _, p := range []string{filepath.Join(filepath.Dir(file), name), name, filepath.Join("docs", filepath.Base(name))} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// TestEveryDocPageIsLinked: the README's table reaches every page of docs/.
func TestEveryDocPageIsLinked(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range docFiles(t)[2:] {
		if !strings.Contains(string(readme), "]("+filepath.ToSlash(file)+")") {
			t.Errorf("README.md does not link %s", file)
		}
	}
}

// TestCodeCitesNoUnnamedSource: comments in the code say what a rule is,
// or point at the page of docs/ that says it; none leans on "the article".
func TestCodeCitesNoUnnamedSource(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || path == "docs_test.go" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(strings.ToLower(string(b)), "the article") {
			t.Errorf("%s cites an unnamed article: say what it teaches, or name the docs/ page", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

var (
	snippetMark   = regexp.MustCompile(`^<!-- snippet: (illustration|run by (Test\w+|Example\w+)) -->$`)
	generatedMark = regexp.MustCompile(`^<!-- BEGIN generated by (Test\w+)\b.* -->$`)
)

// TestEverySnippetIsRunOrMarked: every fenced block of the README, the
// docs and the clients' READMEs is either run by a named test that exists
// (`<!-- snippet: run by TestX -->` on the line before it) or marked as an
// illustration (`<!-- snippet: illustration -->`), so a reader knows which
// commands and files were proven to work as written.
func TestEverySnippetIsRunOrMarked(t *testing.T) {
	files := append(docFiles(t), "clients/typescript/README.md", "clients/python/README.md")
	tests := testFuncs(t)
	run := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		inBlock := false
		for i, l := range lines {
			if !strings.HasPrefix(l, "```") {
				continue
			}
			if inBlock {
				inBlock = false
				continue
			}
			inBlock = true
			prev := ""
			if i > 0 {
				prev = lines[i-1]
			}
			m := snippetMark.FindStringSubmatch(prev)
			if g := generatedMark.FindStringSubmatch(prev); g != nil {
				m = []string{g[0], "run by " + g[1], g[1]} // a block a test writes and checks
			}
			switch {
			case m == nil:
				t.Errorf("%s:%d: a fenced block without <!-- snippet: run by TestX --> or <!-- snippet: illustration --> before it", f, i+1)
			case m[2] != "" && !tests[m[2]]:
				t.Errorf("%s:%d: %s names no test of the repository", f, i+1, m[2])
			case m[2] != "":
				run++
			}
		}
	}
	if run < 8 {
		t.Errorf("only %d snippets are run by tests", run)
	}
}

// testFuncs are the names of the repository's test and example functions.
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Example)\w+)\(`)
	out := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	figure  = regexp.MustCompile(`\b\d[\d,]*(\.\d+)? ?(ms|µs|commands/s|cmd/s|/s|MiB|KiB|ops/s|allocs/op|B/op|ns/op)\b`)
	command = regexp.MustCompile("`(go test|go run|scripts/|idemgate |hyperfine|wrk |pgbench|promtool|node |python3 )[^`]*`")
	// measureWords mark a figure as measured rather than configured (a
	// default, a limit): a line with one, or a table in a section with one.
	measureWords = regexp.MustCompile(`(?i)\b(measured|p50|p90|p99|median|throughput|benchmark)`)
)

// TestEveryFigureNamesItsCommand: a section of the docs that states a
// measured figure (a time, a rate, a size per operation, on a line that
// says it was measured or in a table of a section that does) names, in the
// same section, the command that produced it. Settings and limits are not
// measurements.
func TestEveryFigureNamesItsCommand(t *testing.T) {
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAllString(string(b), "")
		sections := regexp.MustCompile(`(?m)^#{2,3} `).Split(text, -1)
		for _, s := range sections {
			measuredSection := measureWords.MatchString(s)
			for _, l := range strings.Split(s, "\n") {
				isFigure := figure.MatchString(l) && (measureWords.MatchString(l) || measuredSection && strings.HasPrefix(l, "|"))
				if isFigure && !command.MatchString(s) {
					title, _, _ := strings.Cut(s, "\n")
					t.Errorf("%s: section %q states a measured figure (%s) without the command that produced it", f, title, figure.FindString(l))
					break
				}
			}
		}
	}
}
