package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mapKeys lists the configuration's keys whose value is a map: their
// entries are the user's (routes.<type>, adapters.http.<name>), so any key
// below one is the user's to name.
func mapKeys(t reflect.Type, prefix string, out map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		key := prefix + name
		if opts == "squash" {
			key = strings.TrimSuffix(prefix, ".")
		}
		switch {
		case ft.Kind() == reflect.Map:
			out[key] = true
		case ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]():
			mapKeys(ft, strings.TrimPrefix(key+".", "."), out)
		}
	}
}

// TestDocsConfigKeysExist: every configuration key the README and the docs
// name (`worker.retry.max_elapsed`, `http_api.enabled`, …) is a key of the
// daemon's configuration, so a renamed or removed key cannot live on in
// the docs.
func TestDocsConfigKeysExist(t *testing.T) {
	keys, maps := map[string]bool{}, map[string]bool{}
	configKeys(t, reflect.TypeFor[Config](), "", keys)
	mapKeys(reflect.TypeFor[Config](), "", maps)
	sections := []string{}
	for k := range keys {
		if !strings.Contains(k, ".") {
			sections = append(sections, regexp.QuoteMeta(k))
		}
	}
	named := regexp.MustCompile("`((?:" + strings.Join(sections, "|") + `)\.[a-z0-9_.<>]+)` + "(?:[`:=]| \\()")
	files, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	files = append(files, "../../README.md")
	checked := 0
	for _, file := range files {
		for _, m := range named.FindAllStringSubmatch(string(mustRead(t, file)), -1) {
			key := strings.TrimSuffix(m[1], ".")
			if ext := filepath.Ext(key); ext == ".db" || ext == ".yaml" || ext == ".json" || ext == ".md" || ext == ".log" {
				continue // a file's name
			}
			if i := strings.Index(key, ".<"); i >= 0 {
				key = key[:i] // a placeholder: the part before it must exist
			}
			checked++
			ok := keys[key]
			for p := key; !ok && strings.Contains(p, "."); {
				p = p[:strings.LastIndex(p, ".")]
				ok = maps[p]
			}
			assert.True(t, ok, "%s names `%s`, which is not a configuration key", filepath.Base(file), m[1])
		}
	}
	require.Greater(t, checked, 30, "the docs' keys were found")
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
