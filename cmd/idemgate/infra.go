package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/postgres"
	"github.com/idemgate/idemgate/journal/sqlite"
)

// journalUse is what a command does with the journal.
type journalUse int

const (
	// readJournal: a journal a daemon made (mcp, trace, resolve,
	// reconcile): it must exist and be migrated; none is created.
	readJournal journalUse = iota
	// daemonJournal: the daemon's own (run): migrated, and created when
	// missing, when journal.auto_migrate is set; else as readJournal.
	daemonJournal
	// createJournal: migrated, and created when missing.
	createJournal
)

// journalStore is a journal as openJournal opens it: the Store, and the
// console's reads (journal.Browser), which both engines serve.
type journalStore interface {
	journal.Store
	journal.Browser
	journal.ProcessStore
}

// openJournal opens the PostgreSQL journal when journal.url is set, else the
// SQLite journal in the data folder. A journal that lacks migrations is
// migrated where use allows it, else refused (the error names `idemgate
// migrate up`), on either engine. A SQLite journal that does not exist is
// created only where use allows it; otherwise the refusal names the path.
func openJournal(ctx context.Context, c Config, log *slog.Logger, use journalUse) (journalStore, func(context.Context) (bool, error), error) {
	migrate := use == createJournal || use == daemonJournal && c.Journal.AutoMigrate
	policy := journal.RequireMigrated
	if migrate {
		policy = journal.MigrateOnOpen
	}
	if c.Journal.URL != "" {
		st, err := postgres.Open(ctx, c.Journal.URL, postgres.Config{Migrations: policy, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		pending := func(ctx context.Context) (bool, error) { return postgres.Pending(ctx, st.Pool()) }
		log.Info("journal: PostgreSQL", "application_name", "idemgate")
		return st, pending, nil
	}
	path, err := filepath.Abs(sqlitePath(c.DataDir))
	if err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if !migrate {
			// Only a command that creates the journal makes its folder: a
			// reader started from elsewhere says where it looked.
			return nil, nil, missingJournalError(c, path, use == daemonJournal)
		}
		if err := movedDataDir(c, "journal.db"); err != nil {
			return nil, nil, configError(err)
		}
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("data folder: %w", err)
	}
	st, err := sqlite.Open(ctx, path, sqlite.Config{Migrations: policy})
	if err != nil {
		return nil, nil, err
	}
	log.Info("journal: embedded SQLite (one replica only; use PostgreSQL for several)", "path", path)
	return st, st.Pending, nil
}

// sqlitePath is where the embedded journal lives in a data folder.
func sqlitePath(dataDir string) string { return filepath.Join(dataDir, "journal.db") }

// natsConn connects to nats.url, or starts the embedded JetStream server
// when none is configured. The returned stop closes both. embedded is the
// address the embedded server listens on ("" when none was started): the
// configured one, or the port it took when nats.embedded_addr has port 0.
func natsConn(c Config, log *slog.Logger, embed bool) (nc *nats.Conn, js jetstream.JetStream, stop func(), embedded string, err error) {
	url := c.NATS.URL
	var ns *server.Server
	if url == "" {
		if !embed {
			if err := embeddedPortZero(c); err != nil {
				return nil, nil, nil, "", err
			}
			url = "nats://" + c.NATS.EmbeddedAddr
		} else {
			if ns, embedded, err = startEmbeddedNATS(c); err != nil {
				return nil, nil, nil, "", err
			}
			url = ns.ClientURL()
			log.Info("nats: embedded JetStream server (single node; set nats.url for a cluster)", "url", url, "store", filepath.Join(c.DataDir, "nats"))
		}
	}
	host, _ := os.Hostname()
	closed := make(chan struct{})
	var closeOnce sync.Once
	nc, err = nats.Connect(url, nats.Name("idemgate@"+host), nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true), nats.ReconnectWait(250*time.Millisecond),
		nats.ClosedHandler(func(*nats.Conn) { closeOnce.Do(func() { close(closed) }) }))
	if err != nil {
		if ns != nil {
			ns.Shutdown()
		}
		return nil, nil, nil, "", fmt.Errorf("nats %s: %w", url, err)
	}
	js, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(16384))
	if err != nil {
		nc.Close()
		if ns != nil {
			ns.Shutdown()
		}
		return nil, nil, nil, "", err
	}
	stop = func() {
		// Drain lets subscriptions and pending publishes finish, then closes
		// the connection, which calls the closed handler. A connection that
		// cannot drain (never connected, reconnecting) is closed at once.
		if err := nc.Drain(); err != nil {
			nc.Close()
		}
		select {
		case <-closed:
		case <-time.After(drainWait):
			log.Warn("nats drain did not finish; closing", "waited", drainWait.String())
			nc.Close()
		}
		if ns != nil {
			ns.Shutdown()
			ns.WaitForShutdown()
		}
	}
	return nc, js, stop, embedded, nil
}

// startEmbeddedNATS starts the embedded JetStream server on
// nats.embedded_addr and returns it with the address it listens on. Port 0
// takes a free port, which the server binds itself: the address it returns
// names it.
func startEmbeddedNATS(c Config) (*server.Server, string, error) {
	host, portStr, err := net.SplitHostPort(c.NATS.EmbeddedAddr)
	if err != nil {
		return nil, "", configError(fmt.Errorf("nats.embedded_addr: %w", err))
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, "", configError(fmt.Errorf("nats.embedded_addr port: %w", err))
	}
	if port == 0 {
		port = server.RANDOM_PORT
	} else {
		// A taken port is said at once, not after the server's start-up wait.
		ln, err := net.Listen("tcp", c.NATS.EmbeddedAddr)
		if err != nil {
			return nil, "", fmt.Errorf("embedded NATS: %w", err)
		}
		_ = ln.Close()
	}
	if err := movedDataDir(c, "nats"); err != nil {
		return nil, "", configError(err)
	}
	store := filepath.Join(c.DataDir, "nats")
	if err := os.MkdirAll(store, 0o700); err != nil {
		return nil, "", fmt.Errorf("data folder: %w", err)
	}
	ns, err := server.NewServer(&server.Options{
		ServerName: "idemgate-embedded", Host: host, Port: port, JetStream: true, StoreDir: store,
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		return nil, "", fmt.Errorf("embedded NATS: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, "", fmt.Errorf("embedded NATS did not start on %s (is the port taken?)", c.NATS.EmbeddedAddr)
	}
	ta, ok := ns.Addr().(*net.TCPAddr)
	if !ok {
		ns.Shutdown()
		return nil, "", fmt.Errorf("embedded NATS on %s: no client listener", c.NATS.EmbeddedAddr)
	}
	return ns, net.JoinHostPort(host, strconv.Itoa(ta.Port)), nil
}

// embeddedPortZero refuses to connect a tool to the embedded server when
// nats.embedded_addr has port 0: the daemon took a port of its own, which
// only its log names.
func embeddedPortZero(c Config) error {
	if _, port, err := net.SplitHostPort(c.NATS.EmbeddedAddr); err == nil && port == "0" {
		return configError(fmt.Errorf("nats.embedded_addr %s has port 0: the daemon's embedded NATS took a free port at start, "+
			"which its log names (\"nats: embedded JetStream server\", url); pass that URL as --nats-url or nats.url", c.NATS.EmbeddedAddr))
	}
	return nil
}

// drainWait bounds the wait for a drained connection to close: past the
// client's own drain timeout (30s), after which it closes the connection
// itself.
const drainWait = 35 * time.Second

// toolConnectTimeout bounds a tool's connection to NATS.
const toolConnectTimeout = 2 * time.Second

// natsClient connects a tool (publish) to nats.url, or to the embedded
// server a running daemon serves. Unlike the daemon it does not wait for a
// server to appear: an unreachable one is said at once, with the likely cause.
func natsClient(c Config) (*nats.Conn, error) {
	servers := c.NATS.URL
	if servers == "" {
		if err := embeddedPortZero(c); err != nil {
			return nil, err
		}
		servers = "nats://" + c.NATS.EmbeddedAddr
	}
	host, _ := os.Hostname()
	nc, err := nats.Connect(servers, nats.Name("idemgate-tool@"+host), nats.Timeout(toolConnectTimeout))
	if err != nil {
		hint := ""
		if c.NATS.URL == "" {
			hint = " (no nats.url is configured, so this is the embedded server of `idemgate run`: is the daemon running with this configuration?)"
		}
		return nil, fmt.Errorf("cannot reach NATS at %s%s: %w", withoutPasswords(servers), hint, err)
	}
	return nc, nil
}

// toolJetStream is natsClient's connection and its JetStream, for the tools
// that publish results.
func toolJetStream(c Config) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := natsClient(c)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// withoutPasswords shows a NATS server list with any password masked.
func withoutPasswords(servers string) string {
	parts := strings.Split(servers, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}
