// The sensitive phase: once the run has settled, the soak plays an agent on
// the HTTP API and an operator resolving an operation, with secret canaries
// (a card number, an sk_live_ key) where only screening or masking keeps
// them out of what idemgate writes: an id field, a description, the
// Idempotency-Key, the request path, an operator's evidence. The checker
// then looks for them everywhere, the commands stream included.

package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgate/idemgate/internal/ctxsleep"
	"github.com/idemgate/idemgate/internal/testkit/childproc"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
)

// secretCanaries are one run's card number and key.
type secretCanaries struct{ card, key string }

// newSecretCanaries makes a Luhn-valid 16-digit card number starting with 4
// and an sk_live_ key, both random.
func newSecretCanaries() secretCanaries {
	b := make([]byte, 14)
	_, _ = rand.Read(b)
	d := []byte{'4'}
	for _, x := range b {
		d = append(d, '0'+x%10)
	}
	// A random key may hold a run of 13+ digits passing the Luhn check,
	// which screening then names a card: draw again until it reads as the
	// key it is.
	key := "sk_live_" + randHex(12)
	for redact.Detect(key) != redact.KindToken {
		key = "sk_live_" + randHex(12)
	}
	return secretCanaries{card: string(append(d, luhnDigit(d))), key: key}
}

// luhnDigit is the check digit that makes digits+it pass the Luhn check.
func luhnDigit(digits []byte) byte {
	sum := 0
	double := true // the rightmost payload digit is doubled once the check digit follows it
	for i := len(digits) - 1; i >= 0; i-- {
		n := int(digits[i] - '0')
		if double {
			if n *= 2; n > 9 {
				n -= 9
			}
		}
		sum += n
		double = !double
	}
	return byte('0' + (10-sum%10)%10)
}

// printed is the card number as a card prints it: four groups of four.
func (c secretCanaries) printed() string {
	return c.card[0:4] + " " + c.card[4:8] + " " + c.card[8:12] + " " + c.card[12:16]
}

// needles are what must appear nowhere.
func (c secretCanaries) needles() []string { return []string{c.card, c.printed(), c.key} }

// sensitiveResult is what the phase leaves for the canary search.
type sensitiveResult struct {
	texts []Text
	notes []string
}

// sensitivePhase probes the HTTP API, then resolves one operation with the
// canaries in its evidence. A part that could not run is a note.
func (s *soak) sensitivePhase(ctx context.Context, sc secretCanaries) sensitiveResult {
	var r sensitiveResult
	bodies, err := s.probeHTTPAPI(ctx, sc)
	if err != nil {
		r.notes = append(r.notes, "sensitive phase: the HTTP API was not probed: "+err.Error())
	}
	r.texts = append(r.texts, Text{Where: "HTTP API answers", Body: bodies})
	out, note := s.resolveWithEvidence(ctx, sc)
	if note != "" {
		r.notes = append(r.notes, "sensitive phase: "+note)
	}
	r.texts = append(r.texts, Text{Where: "idemgate resolve output", Body: out})
	return r
}

// probeHTTPAPI sends the first replica's HTTP API requests carrying the
// canaries, every one of which must be refused: a card number or a key in
// an id field or a description (422), in the Idempotency-Key or twice that
// header (400), in the path (400, and 401 with a wrong token or none). It
// returns every answer's body.
func (s *soak) probeHTTPAPI(ctx context.Context, sc secretCanaries) ([]byte, error) {
	if err := childproc.WaitTCP(ctx, s.httpAPI, 30*time.Second); err != nil {
		return nil, err
	}
	bearer := "Bearer " + s.httpToken
	charge := func(account, order string) string {
		return fmt.Sprintf(`{"account_id":%q,"order_id":%q,"amount_minor":1000,"currency":"RUB"}`, account, order)
	}
	invoice := fmt.Sprintf(`{"order_id":"o-sensitive-3","customer_id":"c-1","amount_minor":1000,"currency":"RUB","description":"card %s, key %s"}`,
		sc.printed(), sc.key)
	probes := []struct {
		name, method, path, auth string
		keys                     []string
		body                     string
	}{
		{"card in order_id", http.MethodPost, "payment.charge", bearer, []string{"sensitive-1"}, charge("merchant-account-17", sc.card)},
		{"key in account_id", http.MethodPost, "payment.charge", bearer, []string{"sensitive-2"}, charge(sc.key, "o-sensitive-2")},
		{"card and key in a description", http.MethodPost, "invoice.create", bearer, []string{"sensitive-3"}, invoice},
		{"card in the Idempotency-Key", http.MethodPost, "payment.charge", bearer, []string{sc.printed()}, charge("merchant-account-17", "o-sensitive-4")},
		{"two Idempotency-Keys", http.MethodPost, "payment.charge", bearer, []string{"sensitive-5", "sensitive-6"}, charge("merchant-account-17", "o-sensitive-5")},
		{"card in the path", http.MethodGet, "soak:payment.charge:" + sc.card + ":v1", bearer, nil, ""},
		{"key in the path, wrong token", http.MethodGet, sc.key, "Bearer not-the-token", nil, ""},
		{"card in the path, no token", http.MethodPost, sc.card, "", []string{"sensitive-7"}, charge("merchant-account-17", "o-sensitive-7")},
	}
	var bodies []byte
	var errs []error
	for _, p := range probes {
		req, err := http.NewRequestWithContext(ctx, p.method, "http://"+s.httpAPI+"/v1/operations/"+p.path, strings.NewReader(p.body))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.name, err))
			continue
		}
		if p.auth != "" {
			req.Header.Set("Authorization", p.auth)
		}
		for _, k := range p.keys {
			req.Header.Add("Idempotency-Key", k)
		}
		req.Header.Set("Idempotency-Approval", "appr-sensitive")
		req.Header.Set("Prefer", "wait=0")
		resp, err := httpClient.Do(req)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.name, err))
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		bodies = append(append(bodies, b...), '\n')
		s.logf("sensitive: HTTP API %s: %d", p.name, resp.StatusCode)
		if resp.StatusCode < 400 {
			// What it published and executed is a canary in the commands
			// stream and a phantom effect: the checker reports both.
			s.logf("sensitive: HTTP API %s was ACCEPTED", p.name)
		}
	}
	_ = os.WriteFile(filepath.Join(s.cfg.out, "logs", "http-api-answers.jsonl"), bodies, 0o644)
	return bodies, errors.Join(errs...)
}

// resolveWithEvidence makes one invoice's outcome unknown for good (1C
// takes it and the answer is lost; every lookup then meets a 503), reads
// what 1C holds, and resolves it as an operator would with `idemgate
// resolve`, the canaries in the evidence (as an operator pastes what the
// customer read out). The decision is true to the ledger, so every other
// invariant holds. It returns the command's output, and a note when the
// resolution could not be made.
func (s *soak) resolveWithEvidence(ctx context.Context, sc secretCanaries) ([]byte, string) {
	if err := s.injectFaults("onec", []map[string]any{{"kind": "lose_response_close", "scope": "create", "count": 1},
		{"kind": "http_503", "scope": "read"}}); err != nil {
		return nil, "no operator resolution: " + err.Error()
	}
	defer s.clearFaults()
	sent, err := s.wl.one(operation.TypeInvoiceCreate)
	if err != nil || sent.Acked.IsZero() {
		return nil, fmt.Sprintf("no operator resolution: the invoice was not published (%v)", err)
	}
	status := ""
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && status != "unknown" {
		if !ctxsleep.For(ctx, 200*time.Millisecond) {
			break
		}
		status = s.rowStatus(ctx, sent.Key)
	}
	if status != "unknown" {
		return nil, fmt.Sprintf("no operator resolution: %s was %q, never unknown", sent.Key, status)
	}
	effects, err := s.ledger("onec")
	if err != nil {
		return nil, "no operator resolution: " + err.Error()
	}
	args := []string{"resolve", sent.Key, "--as", "failed_final", "--operator", "soak-operator",
		"--config", filepath.Join(s.cfg.out, s.replicas[0].Name+".yaml")}
	found := "no invoice for the key"
	for _, e := range effects {
		if e.Key == sent.Key {
			args[3] = "succeeded"
			args = append(args, "--object", e.ObjectID)
			found = "invoice " + e.ObjectID + " exists"
			break
		}
	}
	args = append(args, "--evidence", fmt.Sprintf("checked 1C by hand: %s; the customer read out card %s and the shop's key %s", found, sc.printed(), sc.key))
	cmd := exec.CommandContext(ctx, s.bin("idemgate"), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.cfg.out}
	out, err := cmd.CombinedOutput()
	_ = os.WriteFile(filepath.Join(s.cfg.out, "logs", "resolve.txt"), out, 0o644)
	s.logf("sensitive: idemgate resolve %s --as %s: %v %s", sent.Key, args[3], err, strings.TrimSpace(string(out)))
	if err != nil {
		return out, fmt.Sprintf("idemgate resolve %s failed: %v", sent.Key, err)
	}
	return out, ""
}

// rowStatus is the journal's status of key, "" when it cannot be read.
func (s *soak) rowStatus(ctx context.Context, key string) string {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, s.pg.URL(soakDB))
	if err != nil {
		return ""
	}
	defer conn.Close(context.Background())
	var st string
	_ = conn.QueryRow(cctx, `SELECT status FROM agent_operation_log WHERE operation_key = $1`, key).Scan(&st)
	return st
}
