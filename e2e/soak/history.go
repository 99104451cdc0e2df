package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// History is everything a soak run recorded, as the checker reads it: what
// the workload sent, what the targets did (their ledgers), what the daemons
// published (the results stream and the replies), what the journal holds,
// and where secrets must not appear. It is plain data so that the checker
// can be tested on synthetic histories.
type History struct {
	// Sent is every command message the publisher sent (PubAck received).
	Sent []Sent `json:"sent"`
	// Effects is every effect in every target emulator's ledger.
	Effects []Effect `json:"-"`
	// Results is every message of the results stream.
	Results []ResultMsg `json:"-"`
	// Rows is the journal (agent_operation_log) after settling.
	Rows []Row `json:"-"`
	// Attempts is the attempts trail (agent_operation_attempts) after settling.
	Attempts []Attempt `json:"-"`
	// Approvals are the journal's approval records after settling.
	Approvals []ApprovalRec `json:"-"`
	// Processes are the journal's process records after settling.
	Processes []ProcessRow `json:"-"`
	// Unacked is how many commands the durable consumer still had pending or
	// unacknowledged after settling.
	Unacked int `json:"unacked"`
	// HeldMax is, per replica, the longest any command delivery was held
	// (fetched, not yet settled), sampled each second through the run and
	// the settle; HeldBound is the most this configuration allows
	// (heldBound), 0 when not measured.
	HeldMax   map[string]float64 `json:"held_max_seconds,omitempty"`
	HeldBound float64            `json:"held_bound_seconds,omitempty"`
	// Texts are the places canaries must not appear: daemon logs, the
	// journal dump, the results, the metrics, the commands stream, the HTTP
	// API's error bodies.
	Texts []Text `json:"-"`
	// Canary is the marker the workload's free text carries: it may be in
	// the commands stream (Text.Commands), nowhere else.
	Canary string `json:"canary"`
	// SecretCanaries are the card number (as one run and as printed) and
	// the sk_live_ key the sensitive phase sent where only screening or
	// masking keeps them out: in id fields and the Idempotency-Key of the
	// HTTP API, in the request path, in an operator's evidence. They must
	// appear nowhere, the commands stream included.
	SecretCanaries []string `json:"secret_canaries,omitempty"`
	// Secrets are the targets' credentials and the HTTP API's token, which
	// must not appear either.
	Secrets []string `json:"-"`
	// NativeOnly names the targets protected by their own key alone: an
	// effect made while a connector dropped that key is the documented
	// residual double-write window, reported but not a breach.
	NativeOnly map[string]bool `json:"native_only"`
	// Windows is the nemesis timeline.
	Windows []Window `json:"windows"`
	// Start and End bound the workload.
	Start, End time.Time
}

// Message kinds the workload sends.
const (
	KindFresh   = "fresh"   // a new intent
	KindCopy    = "copy"    // an earlier intent again, same content, new Nats-Msg-Id
	KindAlt     = "alt"     // an earlier intent with other content: conflict (or, if it came first, the winner)
	KindPoison  = "poison"  // malformed but keyed: must be rejected
	KindKeyless = "keyless" // not even JSON: must be rejected, no key derivable
)

// Sent is one command message.
type Sent struct {
	MsgID string `json:"msg_id"`
	Key   string `json:"key"`
	Op    string `json:"op"`
	Kind  string `json:"kind"`
	// Fingerprint is the request hash of this message's content ("" for poison).
	Fingerprint string    `json:"fingerprint,omitempty"`
	At          time.Time `json:"at"`    // first publish attempt
	Acked       time.Time `json:"acked"` // PubAck
	Reply       *Reply    `json:"reply,omitempty"`
	// NeedsApproval: the daemons' policy gates this intent (a charge above
	// approvalAbove): no effect without a person's approval of its
	// fingerprint.
	NeedsApproval bool `json:"needs_approval,omitempty"`
}

// Reply is the first final (non-pending) result received on the command's
// reply subject (core NATS: best effort, lost while NATS is down).
type Reply struct {
	Status   string    `json:"status"`
	ObjectID string    `json:"object_id,omitempty"`
	At       time.Time `json:"at"`
}

// Effect is one object a target created (sandbox ledger).
type Effect struct {
	Target     string    `json:"target"`
	Key        string    `json:"key"`
	ObjectID   string    `json:"object_id"`
	KeyIgnored bool      `json:"key_ignored,omitempty"`
	At         time.Time `json:"at"`
	// Kind is the ledger's object type ("invoice", "payment",
	// "payment_canceled"…).
	Kind string `json:"kind,omitempty"`
}

// refusalKinds are objects a target keeps of a refusal: a payment the bank
// declined is a canceled payment in YooKassa — an object under the key,
// no money moved. It answers failed_final (declined) truthfully.
var refusalKinds = map[string]bool{"payment_canceled": true}

// Refusal reports whether e records a refusal rather than a business
// effect.
func (e Effect) Refusal() bool { return refusalKinds[e.Kind] }

// ResultMsg is one message of the results stream.
type ResultMsg struct {
	Key      string    `json:"operation_key"`
	EventID  string    `json:"event_id"`
	Status   string    `json:"status"`
	ObjectID string    `json:"target_object_id,omitempty"`
	At       time.Time `json:"at"` // stored in the stream
}

// Row is one journal row.
type Row struct {
	Key         string
	Status      string
	ObjectID    string
	RequestHash string
	Token       int64
}

// ApprovalRec is an approval record: its state, the fingerprint it was
// requested for, and the fingerprints its approve votes cover.
type ApprovalRec struct {
	Key         string
	State       string
	RequestHash string
	Approved    []string
}

// Attempt is one entry of the attempts trail.
type Attempt struct {
	Key       string
	Attempt   int
	Token     int64
	Worker    string
	Kind      string // execute, reconcile, operator
	Started   time.Time
	Finished  time.Time // zero while open
	Outcome   string    // "" while open
	ErrorCode string
	Note      string
}

// Text is one place to search for canaries.
type Text struct {
	Where string
	Body  []byte
	// Commands: the text is the commands stream, where the workload's
	// free-text canary is expected (producers publish it) and only the
	// secret canaries and credentials are leaks.
	Commands bool
}

// Window is one nemesis action, from its start to its recovery.
type Window struct {
	Kind   string    `json:"kind"`
	Detail string    `json:"detail"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	// Note says how it went (e.g. the crash point was reached).
	Note string `json:"note,omitempty"`
}

// The history files a run saves (JSON lines), which recheck reads back.
const (
	sentFile     = "history-sent.jsonl"      // every command and its reply
	resultsFile  = "history-results.jsonl"   // the results stream
	effectsFile  = "history-effects.jsonl"   // the targets' ledgers
	attemptsFile = "history-attempts.jsonl"  // the journal's attempts trail
	processFile  = "history-processes.jsonl" // the journal's process records
)

// saveHistory keeps what the checker read, for whoever investigates a breach
// or rechecks the run.
func saveHistory(dir string, h History) error {
	return errors.Join(writeJSONL(dir, sentFile, h.Sent), writeJSONL(dir, resultsFile, h.Results),
		writeJSONL(dir, effectsFile, h.Effects), writeJSONL(dir, attemptsFile, h.Attempts), writeJSONL(dir, processFile, h.Processes))
}

// writeJSONL writes items into dir/name, one JSON document a line.
func writeJSONL[T any](dir, name string, items []T) error {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// readJSONL appends to into each line of dir/name, decoded.
func readJSONL[T any](dir, name string, into *[]T) error {
	return eachLine(dir, name, func(l []byte) error {
		var v T
		err := json.Unmarshal(l, &v)
		*into = append(*into, v)
		return err
	})
}

// eachLine calls each with every line of dir/name.
func eachLine(dir, name string, each func([]byte) error) error {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		if err := each(sc.Bytes()); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return sc.Err()
}
