package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/idemgate/idemgate/console"
	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/ingest"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/process"
	"github.com/idemgate/idemgate/process/coordinator"
	"github.com/idemgate/idemgate/worker"
)

// Config is the whole configuration. configs/idemgate.example.yaml documents
// every key; environment variables IDEMGATE_<KEY> (dots become underscores)
// override the file, and flags override both.
type Config struct {
	// Env is the first part of every operation key: prod, staging, test…
	Env string `mapstructure:"env"`
	// DataDir holds the embedded NATS store and the SQLite journal. A
	// relative path is resolved against the configuration file's folder
	// (paths.go).
	DataDir string `mapstructure:"data_dir"`
	Log     struct {
		Level  string `mapstructure:"level"`  // debug, info, warn, error
		Format string `mapstructure:"format"` // json or text
	} `mapstructure:"log"`
	Admin struct {
		// Addr serves /healthz, /livez, /readyz and /metrics; "" disables it.
		Addr string `mapstructure:"addr"`
	} `mapstructure:"admin"`
	// Console is the operator console on the admin listener under /ui/.
	Console console.Config `mapstructure:"console"`
	NATS    struct {
		// URL of the NATS server or cluster; "" runs an embedded JetStream
		// server storing under data_dir (single node only).
		URL string `mapstructure:"url"`
		// EmbeddedAddr is where the embedded server listens (for publish and
		// the nats CLI). Default 127.0.0.1:4223.
		EmbeddedAddr    string `mapstructure:"embedded_addr"`
		consumer.Config `mapstructure:",squash"`
	} `mapstructure:"nats"`
	Journal struct {
		// URL of PostgreSQL; "" uses the SQLite journal under data_dir
		// (one replica only).
		URL string `mapstructure:"url"`
		// Retention keeps finished operations this long; a redelivery after
		// that would execute again. Default 30 days.
		Retention time.Duration `mapstructure:"retention"`
		// RetentionByType overrides Retention per operation type.
		RetentionByType map[string]time.Duration `mapstructure:"retention_by_type"`
		// AutoMigrate applies pending migrations at start-up. Default true.
		AutoMigrate bool `mapstructure:"auto_migrate"`
	} `mapstructure:"journal"`
	Worker worker.Config `mapstructure:"worker"`
	// Reconciler settles unknown outcomes and expired leases.
	Reconciler worker.ReconcilerConfig `mapstructure:"reconciler"`
	// Ingest is the webhook-to-queue server: `idemgate ingest`, or inside
	// `idemgate run` when enabled.
	Ingest struct {
		Enabled       bool `mapstructure:"enabled"`
		ingest.Config `mapstructure:",squash"`
	} `mapstructure:"ingest"`
	// Operations declares operation types beside the built-in ones
	// (operation.TypeDecl).
	Operations map[string]operation.TypeDecl `mapstructure:"operations"`
	// Processes declares business processes: ordered steps, each an
	// operation, with compensations (process.Decl; processes.go).
	Processes map[string]process.Decl `mapstructure:"processes"`
	// Coordinator runs the declared processes (processes.go).
	Coordinator coordinator.Config `mapstructure:"coordinator"`
	// atBoundary, set only in this process (the demo's "a coordinator
	// stopped dead mid-checkout"), is the coordinator's AtBoundary: a run
	// for which it answers true stops there as if killed.
	atBoundary func(b coordinator.Boundary, processKey, step string) bool
	// Routes name the adapter instance for each operation type.
	Routes map[string]string `mapstructure:"routes"`
	// Adapters configures each target; see adapterSet.
	Adapters AdaptersConfig `mapstructure:"adapters"`
	// Replicas is the number of daemon replicas sharing the journal; more
	// than one requires PostgreSQL and an external NATS.
	Replicas int `mapstructure:"replicas"`
	// Gateway, MCP and HTTPAPI are the agents' front doors (cmd_mcp.go).
	Gateway gateway.Config `mapstructure:"gateway"`
	MCP     mcpConfig      `mapstructure:"mcp"`
	HTTPAPI faceConfig     `mapstructure:"http_api"`
	// Approvals: which intents wait for a person, and who decides
	// (approvals.go).
	Approvals approvalsConfig `mapstructure:"approvals"`

	// cwdDataDir is data_dir as earlier versions resolved it, against the
	// working directory, when it now resolves elsewhere (paths.go).
	cwdDataDir string
}

// defaults is the configuration when nothing is set.
func defaults() Config {
	var c Config
	c.Env = "prod"
	c.DataDir = defaultDataDir()
	c.Log.Level = "info"
	c.Log.Format = "json"
	c.Admin.Addr = "127.0.0.1:8081"
	c.Console = console.Config{}.WithDefaults()
	c.NATS.EmbeddedAddr = "127.0.0.1:4223"
	c.NATS.Config = consumer.Config{}.WithDefaults()
	c.Journal.Retention = 30 * 24 * time.Hour
	c.Journal.AutoMigrate = true
	c.Worker = worker.Config{}.WithDefaults()
	c.Worker.Owner = ""
	c.Reconciler = worker.ReconcilerConfig{}.WithDefaults()
	c.Coordinator = coordinator.Config{}.WithDefaults()
	c.Ingest.Config = ingest.Config{}.WithDefaults()
	c.Routes = map[string]string{}
	c.Replicas = 1
	// Money waits for a person unless the file says otherwise: an agent
	// cannot charge or refund on its own by default (docs/approvals.md).
	c.Approvals.Enabled = true
	faceDefaults(&c)
	return c
}

func defaultDataDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "idemgate")
	}
	return ".idemgate"
}

// loadConfig reads defaults < file < environment < flags into a Config.
// Unknown keys in the file are an error.
func loadConfig(flags *pflag.FlagSet) (Config, error) {
	// Operation types contain dots (payment.charge) and appear as map keys,
	// so nesting uses another delimiter.
	v := viper.NewWithOptions(viper.KeyDelimiter(keyDelim))
	v.SetEnvPrefix("IDEMGATE")
	v.SetEnvKeyReplacer(strings.NewReplacer(keyDelim, "_", "-", "_"))
	v.AutomaticEnv()
	// viper's Unmarshal sees an environment variable only for keys it knows:
	// every key gets a default from one defaults struct.
	setDefaults(v, "", reflect.ValueOf(defaults()))
	// Ecosystem fallbacks, explicit IDEMGATE_ names first.
	_ = v.BindEnv("journal"+keyDelim+"url", "IDEMGATE_JOURNAL_URL", "DATABASE_URL")
	_ = v.BindEnv("nats"+keyDelim+"url", "IDEMGATE_NATS_URL", "NATS_URL")

	path, _ := flags.GetString("config")
	if path == "" {
		path = os.Getenv("IDEMGATE_CONFIG")
	}
	if path == "" {
		path = findConfigFile(configCandidates())
	}
	if path != "" {
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return Config{}, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	for flag, key := range map[string]string{
		"env": "env", "data-dir": "data_dir", "nats-url": "nats.url", "journal-url": "journal.url",
		"log-level": "log.level", "log-format": "log.format",
	} {
		if f := flags.Lookup(flag); f != nil {
			if err := v.BindPFlag(strings.ReplaceAll(key, ".", keyDelim), f); err != nil {
				return Config{}, err
			}
		}
	}
	var c Config
	err := v.UnmarshalExact(&c, viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		mapstructure.StringToTimeDurationHookFunc(), mapstructure.StringToSliceHookFunc(","))))
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	// Lists from the file (webhook sources) take their per-item defaults;
	// ingest publishes into the daemon's commands stream.
	c.Ingest.CommandsStream = c.NATS.CommandsStream
	c.Ingest.Config = c.Ingest.Config.WithDefaults()
	if err := resolvePaths(&c, path, flags); err != nil {
		return Config{}, err
	}
	return c, nil
}

// configCandidates are the files looked for, in order, when neither
// --config nor IDEMGATE_CONFIG names one. Only these names: viper's own search
// would also read an extensionless ./idemgate — the binary itself, when it is
// started from its own folder.
func configCandidates() []string {
	c := []string{"idemgate.yaml", "idemgate.yml"}
	if d, err := os.UserConfigDir(); err == nil {
		c = append(c, filepath.Join(d, "idemgate", "config.yaml"), filepath.Join(d, "idemgate", "config.yml"))
	}
	return append(c, "/etc/idemgate/config.yaml", "/etc/idemgate/config.yml")
}

// findConfigFile returns the first candidate that is a regular file, or "".
func findConfigFile(candidates []string) string {
	for _, p := range candidates {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// setDefaults registers every leaf key of the defaults struct.
func setDefaults(v *viper.Viper, prefix string, val reflect.Value) {
	t := val.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := strings.Split(f.Tag.Get("mapstructure"), ",")
		name := tag[0]
		squash := len(tag) > 1 && tag[1] == "squash"
		key := prefix
		if !squash {
			if name == "" || name == "-" {
				continue
			}
			key = joinKey(prefix, name)
		}
		fv := val.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Time{}) {
			setDefaults(v, key, fv)
			continue
		}
		if f.Type.Kind() == reflect.Pointer && fv.IsNil() {
			continue
		}
		v.SetDefault(key, fv.Interface())
	}
}

const keyDelim = "::"

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + keyDelim + name
}

// validate checks the configuration as a whole and refuses unsafe horizons
// with a clear message.
func (c Config) validate() error {
	var errs []error
	if err := operation.ValidateEnv(c.Env); err != nil {
		errs = append(errs, fmt.Errorf("env: %w", err))
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log.level %q: debug, info, warn or error", c.Log.Level))
	}
	if c.Log.Format != "json" && c.Log.Format != "text" {
		errs = append(errs, fmt.Errorf("log.format %q: json or text", c.Log.Format))
	}
	if err := c.NATS.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	w := c.Worker.WithDefaults()
	if err := w.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := worker.ValidateHorizons(w, c.NATS.Config); err != nil {
		errs = append(errs, err)
	}
	// Retention must outlast the duplicate window, every redelivery and an
	// intent's whole retry budget: a row deleted earlier turns a late
	// redelivery or copy into a new operation.
	horizon := w.Retry.Horizon(c.NATS.MaxDeliver, c.NATS.AckWait)
	check := func(name string, r time.Duration) {
		if r < c.NATS.DuplicateWindow {
			errs = append(errs, fmt.Errorf("unsafe: %s %v is shorter than nats.duplicate_window %v", name, r, c.NATS.DuplicateWindow))
		}
		if r < horizon {
			errs = append(errs, fmt.Errorf("unsafe: %s %v is shorter than the redelivery horizon %v (max_deliver × backoff + ack_wait)", name, r, horizon))
		}
		if r <= w.Retry.MaxElapsed {
			errs = append(errs, fmt.Errorf("unsafe: %s %v must exceed worker.retry.max_elapsed %v, the retry budget of an intent", name, r, w.Retry.MaxElapsed))
		}
		if r < c.NATS.CommandsMaxAge {
			errs = append(errs, fmt.Errorf("unsafe: %s %v is shorter than nats.commands_max_age %v: a command still in the stream could execute again", name, r, c.NATS.CommandsMaxAge))
		}
	}
	check("journal.retention", c.Journal.Retention)
	for typ, r := range c.Journal.RetentionByType {
		check("journal.retention_by_type."+typ, r)
	}
	if c.Ingest.Enabled || len(c.Ingest.Sources) > 0 {
		if err := c.Ingest.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Replicas < 1 {
		errs = append(errs, fmt.Errorf("replicas %d: at least 1", c.Replicas))
	}
	if c.Replicas > 1 && c.Journal.URL == "" {
		errs = append(errs, errors.New("unsafe: several replicas need a shared PostgreSQL journal (journal.url): the SQLite journal is one machine's"))
	}
	if c.Replicas > 1 && c.NATS.URL == "" {
		errs = append(errs, errors.New("unsafe: several replicas need a shared NATS (nats.url): the embedded server is one process's"))
	}
	errs = append(errs, c.validateFaces()...)
	errs = append(errs, c.validateApprovals()...)
	if err := c.Console.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Console.Enabled && c.Admin.Addr == "" {
		errs = append(errs, errors.New("console.enabled needs the admin listener (admin.addr)"))
	}
	reg, err := c.registry()
	if err != nil {
		errs = append(errs, err)
		reg = operation.DefaultRegistry()
	}
	if _, err := c.processes(reg); err != nil {
		errs = append(errs, err)
	}
	coord := c.Coordinator.WithConsumer(c.NATS.Config.WithDefaults())
	coord.Owner = "validate" // each daemon names its own
	if err := coord.Validate(c.NATS.Config.WithDefaults()); err != nil {
		errs = append(errs, err)
	}
	for op, name := range c.Routes {
		if _, ok := reg.Lookup(op); !ok {
			errs = append(errs, fmt.Errorf("routes.%s: unknown operation type", op))
		}
		if name == "" {
			errs = append(errs, fmt.Errorf("routes.%s: empty adapter name", op))
		}
	}
	return errors.Join(errs...)
}
