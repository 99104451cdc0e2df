// Package emulate derives the generic sandbox emulator's contract
// (sandbox/generic) from a declared HTTP JSON target, so that one
// declaration drives both the adapter and the emulator the contract suite
// and `idemgate sandbox` run it against: the create endpoint, where the
// key goes and whether it is honoured (native_key with the key in a
// header or the query: an idempotency store; in the body: a unique
// external id answering the declared duplicate), lookup by key and search
// with its lag (settle_time).
//
// Only declarations an emulator can serve are accepted: a create URL
// without placeholders, lookup URLs that are a path around ${key} (get) or
// a fixed path whose query parameters carry ${key} or ${marker} (search),
// and plain member paths for the id, status and items.
//
// # Where it lives
//
// This package is the one place where the adapter side and the emulator
// side meet, and it belongs to neither. An emulator is written from its
// target's documented contract, never from the adapter it judges, so no
// sandbox package imports adapters; an adapter carries no emulator code,
// so no adapters package imports sandbox, bar the *test suites that run
// an adapter against its emulator. A declared target has no contract but
// its declaration, and deriving its emulator from that declaration is the
// point; so the translation sits here, between the two, and is imported
// only by what composes both: the binary (`idemgate sandbox`), the
// declared targets' suite (adapters/httpjson/httpjsontest) and e2e.
//
// The alternatives were worse. In sandbox/generic, the emulator would read
// the adapter's declaration types (an arrow sandbox → adapters) or a
// second, hand-kept form of the declaration; in package main beside the
// declared-target code, the contract suite and e2e could not derive the
// emulators they run. deps_test.go holds the arrows: emulate imports
// adapters/httpjson and sandbox/generic; neither adapters (outside its
// *test suites) nor sandbox reaches it.
//
// Imports: adapters/httpjson and sandbox/generic.
package emulate

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/idemgate/idemgate/adapters/httpjson"
	"github.com/idemgate/idemgate/sandbox/generic"
)

// ErrNotEmulable is returned for a declaration the generic emulator
// cannot serve.
var ErrNotEmulable = errors.New("declared target cannot be emulated")

func plainPath(p string) bool {
	return p != "" && !strings.ContainsAny(p, "#*?|@\\()[]{}=! ")
}

// Spec returns the emulator spec of declaration c (after WithDefaults).
func Spec(c httpjson.Config) (generic.Spec, error) {
	if c.BaseURL == "" {
		c.BaseURL = "http://emulator.invalid" // the emulator is where the URL will point
	}
	c = c.WithDefaults()
	fail := func(format string, args ...any) (generic.Spec, error) {
		return generic.Spec{}, fmt.Errorf("%w: adapters.http.%s: %s", ErrNotEmulable, c.Name, fmt.Sprintf(format, args...))
	}
	if err := c.Validate(); err != nil {
		return generic.Spec{}, err
	}
	s := generic.Spec{Name: c.Name, CreateMethod: c.Execute.Method, SearchLag: c.Capabilities.SettleTime}
	if strings.Contains(c.Execute.URL, "${") || strings.Contains(c.Execute.URL, "?") {
		return fail("execute.url holds placeholders or a query")
	}
	s.CreatePath = c.Execute.URL
	switch c.Key.In {
	case httpjson.KeyInHeader:
		s.KeyHeader = c.Key.Name
	case httpjson.KeyInQuery:
		s.KeyQuery = c.Key.Name
	default:
		s.KeyField = c.Key.Name
	}
	if c.Capabilities.NativeKey {
		if c.Key.In == httpjson.KeyInBody {
			s.UniqueKey = true
		} else {
			s.HonourKey = true
		}
	}
	for _, r := range c.Errors {
		if r.Class != httpjson.ClassLookup {
			continue
		}
		if len(r.Status) > 0 {
			s.DuplicateStatus = r.Status[0]
		}
		switch {
		case r.BodyPath != "" && plainPath(r.BodyPath):
			s.DuplicateBody = nest(r.BodyPath, r.Equals)
		case r.BodyPath != "":
			return fail("errors: the duplicate rule's body_path must be a plain member path")
		case r.Contains != "":
			s.DuplicateBody = map[string]any{"error": r.Contains}
		}
		break
	}
	for _, p := range []string{c.Execute.ObjectID} {
		if !plainPath(p) {
			return fail("execute.object_id must be a plain member path")
		}
	}
	s.IDField = c.Execute.ObjectID
	if c.Execute.Status != "" {
		if !plainPath(c.Execute.Status) {
			return fail("execute.status must be a plain member path")
		}
		s.StatusField, s.Status = c.Execute.Status, c.Execute.StatusDefault
	}
	if c.Execute.KeyEcho != "" {
		if !plainPath(c.Execute.KeyEcho) {
			return fail("execute.key_echo must be a plain member path")
		}
		s.KeyEchoField = c.Execute.KeyEcho
	}
	for i, l := range c.Lookup {
		if l.Method != http.MethodGet {
			return fail("lookup[%d]: the emulator serves GET lookups", i)
		}
		path, query, _ := strings.Cut(l.URL, "?")
		switch l.Mode {
		case httpjson.LookupGet:
			if query != "" || strings.Count(path, "${key}") != 1 || strings.Count(path, "${") != 1 {
				return fail("lookup[%d]: a get URL is a path around ${key}", i)
			}
			get := strings.Replace(path, "${key}", "{key}", 1)
			if s.GetPath != "" && s.GetPath != get {
				return fail("lookup[%d]: one get path", i)
			}
			s.GetPath = get
			if l.NotFoundPath != "" {
				if !plainPath(l.NotFoundPath) {
					return fail("lookup[%d].not_found_path must be a plain member path", i)
				}
				s.NotFoundBody = nest(l.NotFoundPath, l.NotFoundEquals)
			}
		case httpjson.LookupSearch:
			if strings.Contains(path, "${") {
				return fail("lookup[%d]: a search path holds no placeholder", i)
			}
			if s.SearchPath != "" && s.SearchPath != path {
				return fail("lookup[%d]: one search path", i)
			}
			s.SearchPath = path
			if l.Items != "" && !plainPath(l.Items) {
				return fail("lookup[%d].items must be a plain member path", i)
			}
			s.SearchItems = l.Items
			for _, kv := range strings.Split(query, "&") {
				name, val, _ := strings.Cut(kv, "=")
				name, _ = url.QueryUnescape(name)
				switch val {
				case "${marker}":
					s.SearchText = name
				case "${key}":
				default:
					return fail("lookup[%d]: search parameters carry ${key} (a member equal to the key) or ${marker} (a text holding it)", i)
				}
			}
		}
	}
	return s, nil
}

func nest(path string, v any) map[string]any {
	parts := strings.Split(path, ".")
	m := map[string]any{parts[len(parts)-1]: v}
	for i := len(parts) - 2; i >= 0; i-- {
		m = map[string]any{parts[i]: m}
	}
	return m
}
