package main

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/viper"
	"github.com/stretchr/testify/require"
)

const exampleConfig = "../../configs/idemgate.example.yaml"

// configKeys lists every key path the configuration struct t accepts, from
// its mapstructure tags: nested sections joined with '.', list items as
// "[]" (ingest.sources[].routes[].payload[].field). A map's own entries are
// the user's (routes, retention_by_type), so only the map's key is listed.
func configKeys(tb testing.TB, t reflect.Type, prefix string, out map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := strings.Split(f.Tag.Get("mapstructure"), ",")
		if tag[0] == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if len(tag) > 1 && tag[1] == "squash" {
			configKeys(tb, ft, prefix, out)
			continue
		}
		require.NotEmpty(tb, tag[0], "field %s has a mapstructure name", f.Name)
		key := prefix + tag[0]
		out[key] = true
		switch {
		case ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]():
			configKeys(tb, ft, key+".", out)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			configKeys(tb, ft.Elem(), key+"[].", out)
		}
	}
}

// fileKeys lists every key path present in a parsed YAML document, in the
// same notation.
func fileKeys(v any, prefix string, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			out[prefix+k] = true
			fileKeys(e, prefix+k+".", out)
		}
	case []any:
		for _, e := range v {
			fileKeys(e, strings.TrimSuffix(prefix, ".")+"[].", out)
		}
	}
}

// commentedItemKey reports whether key, an item key of a list the example
// leaves empty (a.b.list[].leaf), is documented by the commented item
// right under `list: []`: a list whose items would be refused as they
// stand (approvals.tokens.issuers names key files) is shown that way.
func commentedItemKey(text, key string) bool {
	list, leaf, ok := strings.Cut(key, "[].")
	if !ok || strings.Contains(leaf, ".") {
		return false
	}
	name := list[strings.LastIndex(list, ".")+1:]
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), name+": []") {
			continue
		}
		for _, c := range lines[i+1:] {
			body, isComment := strings.CutPrefix(strings.TrimSpace(c), "#")
			if !isComment {
				break
			}
			if strings.HasPrefix(strings.TrimLeft(strings.TrimSpace(body), "- "), leaf+":") {
				return true
			}
		}
	}
	return false
}

// TestExampleConfigDocumentsEveryKey: every key the configuration accepts
// — each adapter's, each ingest source's, route's and payload mapping's —
// appears in configs/idemgate.example.yaml.
func TestExampleConfigDocumentsEveryKey(t *testing.T) {
	t.Parallel()
	want := map[string]bool{}
	configKeys(t, reflect.TypeFor[Config](), "", want)
	v := viper.NewWithOptions(viper.KeyDelimiter(keyDelim))
	v.SetConfigFile(exampleConfig)
	require.NoError(t, v.ReadInConfig())
	have := map[string]bool{}
	fileKeys(v.AllSettings(), "", have)
	raw, err := os.ReadFile(exampleConfig)
	require.NoError(t, err)
	var missing []string
	for k := range want {
		if !have[k] && !commentedItemKey(string(raw), k) {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "keys the example configuration does not document")
	require.True(t, want["adapters.stripe.refund_max_pages"] && want["ingest.sources[].refetch.secret_key_file"] &&
		want["ingest.sources[].routes[].payload[].scale"] && want["nats.max_msg_size"], "the walk reaches every level")
}

// TestExampleConfigLoadsAndBuilds: the example loads with unknown keys
// rejected, passes validation, and builds all six adapters once the
// credentials it names are in the environment — and not without them.
func TestExampleConfigLoadsAndBuilds(t *testing.T) {
	body, err := os.ReadFile(exampleConfig)
	require.NoError(t, err)
	c, err := loadConfig(flagsWith(t, "--config", exampleConfig))
	require.NoError(t, err)
	require.NoError(t, c.validate())
	a := c.Adapters
	require.True(t, a.OneC != nil && a.Bitrix24 != nil && a.AmoCRM != nil && a.YooKassa != nil && a.TBank != nil && a.Stripe != nil,
		"all six adapters are documented")
	require.Len(t, c.Ingest.Sources, 4, "one webhook source per scheme")

	_, err = buildAdapters(c, quietLog(), nil)
	require.Error(t, err, "the real targets need credentials")
	for _, env := range []string{"IDEMGATE_ONEC_PASSWORD", "IDEMGATE_BITRIX24_WEBHOOK_CODE", "IDEMGATE_AMOCRM_TOKEN",
		"YOOKASSA_SHOP_ID", "YOOKASSA_SECRET_KEY", "TBANK_TERMINAL_KEY", "TBANK_PASSWORD", "STRIPE_SECRET_KEY",
		"IDEMGATE_WAREHOUSE_TOKEN"} {
		require.Contains(t, string(body), env, "the example names %s", env)
		t.Setenv(env, "test-credential-"+strings.ToLower(env))
	}
	routes, err := buildAdapters(c, quietLog(), nil)
	require.NoError(t, err)
	require.Len(t, routes, len(c.Routes))

	// An unknown key anywhere is refused.
	bad := strings.Replace(string(body), "    refund_max_pages: 10", "    refund_max_pages: 10\n    refund_max_page: 10", 1)
	require.NotEqual(t, string(body), bad)
	_, err = loadConfig(flagsWith(t, "--config", writeConfig(t, bad)))
	require.ErrorContains(t, err, "refund_max_page")
}

// TestEnvironmentNames: IDEMGATE_<KEY PATH> sets a key; the ecosystem's
// NATS_URL and DATABASE_URL work too, and the IDEMGATE_ names win.
func TestEnvironmentNames(t *testing.T) {
	t.Setenv("IDEMGATE_CONFIG", "")
	t.Chdir(t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("NATS_URL", "nats://from-nats-url:4222")
	t.Setenv("DATABASE_URL", "postgres://from-database-url/db")
	t.Setenv("IDEMGATE_INGEST_MAX_BODY_BYTES", "1000")
	c, err := loadConfig(flagsWith(t))
	require.NoError(t, err)
	require.Equal(t, "nats://from-nats-url:4222", c.NATS.URL)
	require.Equal(t, "postgres://from-database-url/db", c.Journal.URL)
	require.Equal(t, int64(1000), c.Ingest.MaxBodyBytes)
	t.Setenv("IDEMGATE_NATS_URL", "nats://from-idemgate:4222")
	t.Setenv("IDEMGATE_JOURNAL_URL", "postgres://from-idemgate/db")
	c, err = loadConfig(flagsWith(t))
	require.NoError(t, err)
	require.Equal(t, "nats://from-idemgate:4222", c.NATS.URL)
	require.Equal(t, "postgres://from-idemgate/db", c.Journal.URL)
}

// TestDeployComposeConfigLoads: the configuration deploy/compose.yaml mounts
// into its replicas loads, validates and builds its adapters (the emulators'
// test credentials are inline there), so `docker compose up` does not meet
// an exit 78.
func TestDeployComposeConfigLoads(t *testing.T) {
	c, err := loadConfig(flagsWith(t, "--config", "../../deploy/compose/idemgate.yaml"))
	require.NoError(t, err)
	require.NoError(t, c.validate())
	require.Equal(t, 3, c.NATS.Replicas)
	require.Equal(t, 3, strings.Count(c.NATS.URL, "nats://"), "every cluster node is named")
	routes, err := buildAdapters(c, quietLog(), nil)
	require.NoError(t, err)
	require.Len(t, routes, len(c.Routes))
}

// TestIngestPublishesIntoTheDaemonsCommandsStream: ingest has no stream or
// subject keys of its own; it publishes into nats.commands_stream, and the
// keys it used to have are refused as unknown.
func TestIngestPublishesIntoTheDaemonsCommandsStream(t *testing.T) {
	t.Setenv("IDEMGATE_CONFIG", "")
	t.Chdir(t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	c, err := loadConfig(flagsWith(t))
	require.NoError(t, err)
	require.Equal(t, "IDEMGATE_COMMANDS", c.Ingest.CommandsStream, "the default commands stream")
	c, err = loadConfig(flagsWith(t, "--config", writeFile(t, "idemgate.yaml", "nats:\n  commands_stream: ORDERS_COMMANDS\n")))
	require.NoError(t, err)
	require.Equal(t, "ORDERS_COMMANDS", c.Ingest.CommandsStream)
	for _, key := range []string{"stream: IDEMGATE_COMMANDS", "subject_prefix: idemgate.cmd."} {
		_, err := loadConfig(flagsWith(t, "--config", writeFile(t, "idemgate.yaml", "ingest:\n  "+key+"\n")))
		require.Error(t, err, "ingest.%s is no key any more", key)
		require.Contains(t, err.Error(), strings.Split(key, ":")[0])
	}
}

// writeFile writes body to a new file named name in a fresh folder.
func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

// TestDataDirDefault: with no data_dir configured the state lives in
// ./.idemgate, or under $XDG_STATE_HOME when that is set, as
// docs/configuration.md says.
func TestDataDirDefault(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "")
	require.Equal(t, ".idemgate", defaults().DataDir)
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	require.Equal(t, filepath.Join(state, "idemgate"), defaults().DataDir)
	c, err := loadConfig(flagsWith(t, "--config", writeConfig(t, "env: test\n")))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(state, "idemgate"), c.DataDir)
}
