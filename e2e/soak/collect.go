// What a run reads once the workload is over: the wait for everything to
// settle, then the history the checker is given (the targets' ledgers, the
// results stream, the journal and its trail, the logs and metrics).

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemgate/idemgate/internal/ctxsleep"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/wire"
)

// settle waits until every command is acknowledged, every journal row is
// final and no publisher is still retrying, or the settle timeout.
func (s *soak) settle(ctx context.Context) bool {
	deadline := time.Now().Add(s.cfg.settle)
	last := time.Time{}
	for time.Now().Before(deadline) {
		unacked, uerr := s.unacked(ctx)
		rows, rerr := s.unsettledRows(ctx)
		inflight := s.wl.inflight.Load()
		if uerr == nil && rerr == nil && unacked == 0 && rows == 0 && inflight == 0 {
			return true
		}
		if time.Since(last) > 10*time.Second {
			s.logf("settling: %d commands unacked (%v), %d rows unsettled (%v), %d publishing", unacked, uerr, rows, rerr, inflight)
			last = time.Now()
		}
		if !ctxsleep.For(ctx, 500*time.Millisecond) {
			return false
		}
	}
	return false
}

// unacked counts the commands, operations' and processes', still pending or
// unacknowledged in the daemons' consumers.
func (s *soak) unacked(ctx context.Context) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n := 0
	for _, sc := range [][2]string{{daemonNATS.CommandsStream, daemonNATS.Durable}, {daemonNATS.ProcessesStream, daemonNATS.ProcessDurable}} {
		c, err := s.js.Consumer(cctx, sc[0], sc[1])
		if err != nil {
			return -1, err
		}
		info, err := c.Info(cctx)
		if err != nil {
			return -1, err
		}
		n += int(info.NumPending) + info.NumAckPending
	}
	return n, nil
}

func (s *soak) unsettledRows(ctx context.Context) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, s.pg.URL(soakDB))
	if err != nil {
		return -1, err
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(cctx, `SELECT count(*) FROM agent_operation_log WHERE status IN ('started','unknown','failed_retryable')`).Scan(&n)
	if err != nil {
		return n, err
	}
	// An intent waiting for a person, or decided and not yet carried out,
	// has not settled either.
	var waiting int
	err = conn.QueryRow(cctx, `SELECT count(*) FROM agent_operation_approvals WHERE released_at IS NULL`).Scan(&waiting)
	if err != nil {
		return n, err
	}
	// Nor a process still moving.
	var moving int
	err = conn.QueryRow(cctx, `SELECT count(*) FROM process_log WHERE status IN ('running','compensating')`).Scan(&moving)
	return n + waiting + moving, err
}

func (s *soak) scrapeMetrics() {
	for i, a := range s.adminAddr {
		resp, err := httpClient.Get("http://" + a + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		_ = os.WriteFile(filepath.Join(s.cfg.out, "logs", fmt.Sprintf("metrics-%s.txt", s.replicas[i].Name)), b, 0o644)
	}
}

// collect reads the history after settling.
func (s *soak) collect(ctx context.Context) (History, error) {
	h := History{Sent: s.wl.snapshot(), Canary: s.wl.canary, Secrets: s.sb.secrets,
		NativeOnly: map[string]bool{"onec": true, "yookassa": true}, Windows: s.nem.timeline()}
	var err error
	if h.Unacked, err = s.unacked(ctx); err != nil {
		return h, fmt.Errorf("consumer state: %w", err)
	}
	for _, t := range []string{"onec", "yookassa", "bitrix24"} {
		es, err := s.ledger(t)
		if err != nil {
			return h, err
		}
		h.Effects = append(h.Effects, es...)
	}
	var resultsText bytes.Buffer
	if h.Results, err = s.results(ctx, &resultsText); err != nil {
		return h, err
	}
	h.Texts = append(h.Texts, Text{Where: "results stream", Body: resultsText.Bytes()})
	commands, err := s.streamText(ctx, daemonNATS.CommandsStream, wire.CommandSubjects)
	if err != nil {
		return h, fmt.Errorf("commands stream: %w", err)
	}
	h.Texts = append(h.Texts, Text{Where: "commands stream", Body: commands, Commands: true})
	if err := s.journal(ctx, &h); err != nil {
		return h, err
	}
	s.scrapeMetrics()
	for _, p := range s.replicas {
		for _, f := range []string{p.Name + ".log", "metrics-" + p.Name + ".txt"} {
			b, err := os.ReadFile(filepath.Join(s.cfg.out, "logs", f))
			if err == nil {
				h.Texts = append(h.Texts, Text{Where: f, Body: b})
			}
		}
	}
	return h, nil
}

func (s *soak) ledger(target string) ([]Effect, error) {
	resp, err := httpClient.Get(s.sb.urls[target] + "/_sandbox/ledger")
	if err != nil {
		return nil, fmt.Errorf("ledger of %s: %w", target, err)
	}
	defer resp.Body.Close()
	var l struct {
		Effects []struct {
			Key        string    `json:"key"`
			ObjectID   string    `json:"object_id"`
			KeyIgnored bool      `json:"key_ignored"`
			At         time.Time `json:"at"`
			Kind       string    `json:"kind"`
		} `json:"effects"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return nil, fmt.Errorf("ledger of %s: %w", target, err)
	}
	out := make([]Effect, len(l.Effects))
	for i, e := range l.Effects {
		out[i] = Effect{Target: target, Key: e.Key, ObjectID: e.ObjectID, KeyIgnored: e.KeyIgnored, At: e.At, Kind: e.Kind}
	}
	return out, nil
}

// results reads the whole results stream.
func (s *soak) results(ctx context.Context, raw *bytes.Buffer) ([]ResultMsg, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	stream, err := s.js.Stream(cctx, daemonNATS.ResultsStream)
	if err != nil {
		return nil, fmt.Errorf("results stream: %w", err)
	}
	info, err := stream.Info(cctx)
	if err != nil {
		return nil, err
	}
	total := info.State.Msgs
	cons, err := s.js.OrderedConsumer(cctx, daemonNATS.ResultsStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{wire.ResultSubjects}})
	if err != nil {
		return nil, err
	}
	var out []ResultMsg
	for uint64(len(out)) < total {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, _ := m.Metadata()
			var r operation.Result
			if err := json.Unmarshal(m.Data(), &r); err != nil {
				continue
			}
			raw.Write(m.Data())
			raw.WriteByte('\n')
			rm := ResultMsg{Key: r.OperationKey, EventID: r.EventID, Status: string(r.Status), ObjectID: r.TargetObjectID}
			if md != nil {
				rm.At = md.Timestamp
			}
			out = append(out, rm)
		}
		if n == 0 {
			break
		}
	}
	return out, nil
}

// streamText reads every message of a stream under subjects, one a line,
// for the canary search.
func (s *soak) streamText(ctx context.Context, name, subjects string) ([]byte, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	stream, err := s.js.Stream(cctx, name)
	if err != nil {
		return nil, err
	}
	info, err := stream.Info(cctx)
	if err != nil {
		return nil, err
	}
	cons, err := s.js.OrderedConsumer(cctx, name, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subjects}})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for read := uint64(0); read < info.State.Msgs; {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			out.Write(m.Data())
			out.WriteByte('\n')
		}
		if n == 0 {
			break
		}
		read += uint64(n)
	}
	return out.Bytes(), nil
}

// journal reads the journal and its trail, and dumps both as text for the
// canary search.
func (s *soak) journal(ctx context.Context, h *History) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(cctx, s.pg.URL(soakDB))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	// One snapshot for the rows, the trail and the dump: a reconciler still
	// at work (an unsettled run) cannot make them disagree.
	tx, err := conn.BeginTx(cctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	rows, err := tx.Query(cctx, `SELECT operation_key, status, coalesce(target_object_id, ''), request_hash, lease_token FROM agent_operation_log`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var r Row
		if err := rows.Scan(&r.Key, &r.Status, &r.ObjectID, &r.RequestHash, &r.Token); err != nil {
			return err
		}
		h.Rows = append(h.Rows, r)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// The trail: the first attempt a row still holds, and the table's.
	rows, err = tx.Query(cctx, `SELECT operation_key, attempt_count, lease_token, coalesce(lease_owner, ''), 'execute', created_at,
		first_finished_at, coalesce(first_outcome, ''), coalesce(first_error_code, ''), coalesce(first_note, '')
		FROM agent_operation_log WHERE first_attempt_inline
		UNION ALL
		SELECT operation_key, attempt, lease_token, worker, kind, started_at, finished_at,
		coalesce(outcome, ''), coalesce(error_code, ''), coalesce(note, '') FROM agent_operation_attempts`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var a Attempt
		var fin *time.Time
		if err := rows.Scan(&a.Key, &a.Attempt, &a.Token, &a.Worker, &a.Kind, &a.Started, &fin, &a.Outcome, &a.ErrorCode, &a.Note); err != nil {
			return err
		}
		if fin != nil {
			a.Finished = *fin
		}
		h.Attempts = append(h.Attempts, a)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if h.Approvals, err = approvals(cctx, tx); err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	if h.Processes, err = processRows(cctx, tx); err != nil {
		return fmt.Errorf("processes: %w", err)
	}
	var dump bytes.Buffer
	for _, q := range []string{`SELECT row_to_json(l)::text FROM agent_operation_log l`, `SELECT row_to_json(a)::text FROM agent_operation_attempts a`} {
		rows, err := tx.Query(cctx, q)
		if err != nil {
			return err
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return err
			}
			dump.WriteString(line)
			dump.WriteByte('\n')
		}
		if err := rows.Err(); err != nil {
			return err
		}
	}
	_ = os.WriteFile(filepath.Join(s.cfg.out, "logs", "journal-dump.jsonl"), dump.Bytes(), 0o644)
	h.Texts = append(h.Texts, Text{Where: "journal dump", Body: dump.Bytes()})
	return nil
}
