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

// TestDocsCiteOnlyTheRepository: the README and the docs name no file
// outside the repository as a source.
func TestDocsCiteOnlyTheRepository(t *testing.T) {
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, outside := range []string{"DESIGN.md", "TARGETS.md", "CONVENTIONS.md", "the article"} {
			if strings.Contains(string(b), outside) {
				t.Errorf("%s cites %q, which is not in the repository", file, outside)
			}
		}
	}
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
