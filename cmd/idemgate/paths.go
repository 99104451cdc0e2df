package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/spf13/pflag"
)

// Paths in the configuration.
//
// A relative path in the configuration file — data_dir and every key that
// ends in _file or _dir — is resolved against the folder of that file, so
// that every command given the same --config finds the same journal,
// embedded NATS store and credential files wherever it is started from (a
// desktop MCP client starts `idemgate mcp` from /). data_dir's default
// (.idemgate) is the file's too. A path given on the command line
// (--data-dir) or in an environment variable is resolved against the working
// directory, as command-line arguments are; so is everything when no
// configuration file is read. Every such path is absolute after loadConfig.

// pathKey reports whether a configuration key names a file or a folder.
func pathKey(name string) bool {
	return name == "data_dir" || strings.HasSuffix(name, "_file") || strings.HasSuffix(name, "_dir")
}

// resolvePaths makes every path of c absolute (see above). configFile is
// the file read ("" for none).
func resolvePaths(c *Config, configFile string, flags *pflag.FlagSet) error {
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	base := cwd
	if configFile != "" {
		abs, err := filepath.Abs(configFile)
		if err != nil {
			return fmt.Errorf("config file %s: %w", configFile, err)
		}
		base = filepath.Dir(abs)
	}
	given := func(key string) bool {
		if key == "data_dir" && flags != nil {
			if f := flags.Lookup("data-dir"); f != nil && f.Changed {
				return true
			}
		}
		v, ok := os.LookupEnv("IDEMGATE_" + strings.ToUpper(strings.ReplaceAll(key, keyDelim, "_")))
		return ok && v != ""
	}
	walkPaths(reflect.ValueOf(c).Elem(), "", true, func(key string, p *string, envable bool) {
		if *p == "" || filepath.IsAbs(*p) {
			return
		}
		from := base
		if envable && given(key) {
			from = cwd
		}
		if key == "data_dir" && from != cwd {
			c.cwdDataDir = filepath.Join(cwd, *p)
		}
		*p = filepath.Join(from, *p)
	})
	return nil
}

// walkPaths calls visit for every string field of v whose key is a path
// (pathKey), through nested and squashed structs, pointers, maps and
// slices. key is the field's configuration key; envable is false inside a
// map or a list, whose entries no environment variable names.
func walkPaths(v reflect.Value, prefix string, envable bool, visit func(key string, p *string, envable bool)) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkPaths(v.Elem(), prefix, envable, visit)
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			e := iter.Value()
			if e.Kind() == reflect.Struct {
				// A map's struct values are not addressable: resolve a copy
				// and store it back.
				cp := reflect.New(e.Type()).Elem()
				cp.Set(e)
				walkPaths(cp, joinKey(prefix, fmt.Sprint(iter.Key().Interface())), false, visit)
				v.SetMapIndex(iter.Key(), cp)
				continue
			}
			walkPaths(e, joinKey(prefix, fmt.Sprint(iter.Key().Interface())), false, visit)
		}
	case reflect.Slice:
		for i := range v.Len() {
			walkPaths(v.Index(i), prefix, false, visit)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := strings.Split(f.Tag.Get("mapstructure"), ",")
			key := prefix
			if len(tag) < 2 || tag[1] != "squash" {
				if tag[0] == "" || tag[0] == "-" {
					continue
				}
				key = joinKey(prefix, tag[0])
			}
			fv := v.Field(i)
			if fv.Kind() == reflect.String && pathKey(tag[0]) && fv.CanSet() {
				s := fv.String()
				visit(key, &s, envable)
				fv.SetString(s)
				continue
			}
			walkPaths(fv, key, envable, visit)
		}
	}
}

// missingJournalError is the refusal of a SQLite journal that is not where
// this command expects it. Only `idemgate run` (with journal.auto_migrate)
// and `idemgate migrate up` create a journal; any other command that finds
// none says where it looked instead of creating one, or suggesting to
// create one, beside the daemon's.
func missingJournalError(c Config, path string, creatable bool) error {
	if err := movedDataDir(c, "journal.db"); err != nil {
		return err
	}
	if creatable {
		return fmt.Errorf("no SQLite journal at %s: journal.auto_migrate is false, so on a first start run `idemgate migrate up` first "+
			"with this same configuration, which creates it there; a daemon that has run before keeps its journal elsewhere: set data_dir to that folder", path)
	}
	return fmt.Errorf("no SQLite journal at %s: this command reads the journal of a daemon (`idemgate run`, which creates it in its data_dir) "+
		"and creates none; start the daemon first, or give this command the daemon's configuration "+
		"(data_dir, relative to the configuration file's folder, or an absolute path)", path)
}

// movedDataDir refuses a data folder that is missing where data_dir now
// points (against the configuration file's folder) while the working
// directory holds entry (the journal, the embedded NATS store) where
// earlier versions resolved data_dir: starting afresh there would make a
// second, empty journal or stream beside the real one.
func movedDataDir(c Config, entry string) error {
	if c.cwdDataDir == "" || c.cwdDataDir == c.DataDir {
		return nil
	}
	if _, err := os.Stat(filepath.Join(c.DataDir, entry)); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	old := filepath.Join(c.cwdDataDir, entry)
	if _, err := os.Stat(old); err != nil {
		return nil
	}
	return fmt.Errorf("%s is not in the data folder %s (data_dir, resolved against the configuration file's folder) but is in %s, "+
		"where earlier versions resolved data_dir against the working directory: move %s to %s, or set data_dir to %s; "+
		"starting afresh would make a second, empty one", entry, c.DataDir, c.cwdDataDir, c.cwdDataDir, c.DataDir, c.cwdDataDir)
}
