package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgate/idemgate/internal/ctxsleep"
)

// The approval workload: the daemons gate charges above approvalAbove
// (about one in twenty of the workload's), each waiting at most
// approvalTTL. A decider plays the people: it reads the waiting requests
// from the journal and, through the HTTP API of the first replica (which
// the nemesis kills like the others), approves six in ten, denies two and
// leaves two to expire. Its decisions arrive while the nemesis runs, and
// after the agents' copies of the same intents.
const (
	approvalAbove = 850000
	approvalTTL   = "20s"
)

// decider decides the waiting approval requests.
type decider struct {
	s        *soak
	mu       sync.Mutex
	decided  map[string]string // key → approve, deny, leave
	failures int
}

func newDecider(s *soak) *decider { return &decider{s: s, decided: map[string]string{}} }

// choice is what the people do with key: the same for a key in every run
// with the same keys.
func choice(key string) string {
	h := fnv.New32a()
	h.Write([]byte(key))
	switch n := h.Sum32() % 10; {
	case n < 6:
		return "approve"
	case n < 8:
		return "deny"
	}
	return "leave"
}

// run decides until ctx ends, once a second.
func (d *decider) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := d.round(ctx); err != nil && ctx.Err() == nil {
			d.mu.Lock()
			d.failures++
			d.mu.Unlock()
		}
		if !ctxsleep.For(ctx, time.Second) {
			return
		}
	}
}

// round decides every waiting request not decided yet.
func (d *decider) round(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, d.s.pg.URL(soakDB))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(cctx, `SELECT operation_key FROM agent_operation_approvals WHERE state = 'pending'`)
	if err != nil {
		return err
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, k := range keys {
		d.mu.Lock()
		_, done := d.decided[k]
		d.mu.Unlock()
		c := choice(k)
		if done {
			continue
		}
		if c != "leave" {
			if err := d.post(ctx, k, c); err != nil {
				return err // the replica is down: next round
			}
		}
		d.mu.Lock()
		d.decided[k] = c
		d.mu.Unlock()
	}
	return nil
}

// post sends one decision; a refusal (decided already, expired) counts as
// done.
func (d *decider) post(ctx context.Context, key, vote string) error {
	body := fmt.Sprintf(`{"decision":%q,"reason":"soak: %s"}`, vote, vote)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+d.s.httpAPI+"/v1/operations/"+url.PathEscape(key)+"/approval", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+d.s.approverToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK, http.StatusConflict, http.StatusNotFound:
		return nil
	}
	return fmt.Errorf("decision on %s: HTTP %d", key, resp.StatusCode)
}

// counts says what the people did.
func (d *decider) counts() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for _, c := range d.decided {
		out[c]++
	}
	return out
}

// approvals reads the approval records and their approve votes.
func approvals(ctx context.Context, tx pgx.Tx) ([]ApprovalRec, error) {
	rows, err := tx.Query(ctx, `SELECT a.operation_key, a.state, a.request_hash,
		coalesce(array_agg(v.request_hash) FILTER (WHERE v.vote = 'approve'), '{}')
		FROM agent_operation_approvals a LEFT JOIN agent_operation_approval_votes v USING (operation_key)
		GROUP BY a.operation_key, a.state, a.request_hash`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (ApprovalRec, error) {
		var a ApprovalRec
		err := r.Scan(&a.Key, &a.State, &a.RequestHash, &a.Approved)
		return a, err
	})
}
