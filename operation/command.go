package operation

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Command is the envelope of a message on idemgate.cmd.<operation>. Producers
// marshal it with encoding/json; the Decoder reads it strictly.
type Command struct {
	// EventID is the stable ID of the event or intent (also the Nats-Msg-Id).
	EventID string `json:"event_id"`
	// Operation is the registered operation type, e.g. "payment.charge".
	Operation string `json:"operation"`
	// IntentID is the business intent; defaults to EventID.
	IntentID string `json:"intent_id,omitempty"`
	// KeyVersion is the key version; defaults to DefaultKeyVersion ("v1").
	KeyVersion string `json:"key_version,omitempty"`
	// ApprovalID is the caller's own reference for the approval process it
	// ran (a ticket, a workflow id): optional, stored and traced, not
	// fingerprinted, and it authorises nothing. Whether an intent waits for
	// a person is the approval policy's decision (ApprovalPolicy), and the
	// approval itself is recorded by idemgate, bound to the fingerprint.
	ApprovalID string `json:"approval_id,omitempty"`
	// ApprovalToken is a pre-signed approval from the business's own
	// system: a compact JWS naming this operation, key and fingerprint,
	// which the daemon verifies offline (see approval.Verifier). Not
	// fingerprinted, never stored in the journal, never logged.
	ApprovalToken string `json:"approval_token,omitempty"`
	// OperationKey, when the orchestrator made the key itself, must parse and
	// match the daemon's env and the operation.
	OperationKey string `json:"operation_key,omitempty"`
	// Payload holds the operation's fields.
	Payload json.RawMessage `json:"payload"`
}

// MaxApprovalTokenLen bounds Command.ApprovalToken.
const MaxApprovalTokenLen = 4096

// DefaultMaxSize is the largest command body a Decoder accepts when MaxSize
// is 0: 64 KiB.
const DefaultMaxSize = 64 << 10

// Decoder turns command bodies into validated, normalised Operations.
// It is safe for concurrent use once set up.
type Decoder struct {
	// Env is the daemon's environment, the first part of every key ("prod").
	// Required; see ValidateEnv.
	Env string
	// Registry holds the accepted operation types; nil means DefaultRegistry().
	Registry *Registry
	// MaxSize is the largest body in bytes; 0 means DefaultMaxSize (64 KiB).
	MaxSize int
}

// Validate checks the configuration; call it at start-up. Decode fails with
// ErrInvalidConfig (not a DecodeError) when it does not pass.
func (d *Decoder) Validate() error {
	if err := ValidateEnv(d.Env); err != nil {
		return fmt.Errorf("%w: env: %w", ErrInvalidConfig, err)
	}
	if d.MaxSize < 0 {
		return fmt.Errorf("%w: negative MaxSize", ErrInvalidConfig)
	}
	return nil
}

func (d *Decoder) registry() *Registry {
	if d.Registry != nil {
		return d.Registry
	}
	return defaultRegistry
}

// defaultRegistry backs Decoders and DeriveKey calls with a nil Registry; it
// is never handed out, so nothing can Register on it.
var defaultRegistry = DefaultRegistry()

// Decode validates a command body and returns the Operation to claim.
//
// The envelope is read strictly: at most MaxSize bytes of valid UTF-8 JSON,
// an object with no duplicate member names, only the Command members (plus
// the transport fields attempt, sent_at, trace_id, traceparent, tracestate,
// which are ignored), envelope values strings (null meaning absent for
// optional ones). event_id and operation are required; the operation must be
// registered; the payload must be an object holding only the type's fields
// (plus transport fields, dropped), each normalised by its kind. approval_id
// is optional and authorises nothing (see Command.ApprovalID); approval_token
// (at most MaxApprovalTokenLen bytes) is carried, unverified, in
// Operation.ApprovalToken.
//
// A bad command returns a *DecodeError whose Code matches a sentinel
// (ErrNotJSON, ErrTooLarge, ErrUnknownOperation, ErrMissingField,
// ErrInvalidField, ErrBadKey, ErrKeyMismatch) and carries the key when one
// could be derived. A bad Decoder configuration returns ErrInvalidConfig.
func (d *Decoder) Decode(body []byte) (Operation, error) {
	if err := d.Validate(); err != nil {
		return Operation{}, err
	}
	maxSize := d.MaxSize
	if maxSize == 0 {
		maxSize = DefaultMaxSize
	}
	if len(body) > maxSize {
		return Operation{}, &DecodeError{Code: CodeTooLarge,
			Msg: fmt.Sprintf("command is %d bytes, the limit is %d", len(body), maxSize)}
	}
	st := decodeStates.Get().(*decodeState)
	defer st.release()
	st.p.data = body
	root, err := st.p.scanDocument()
	if err != nil {
		var se *SyntaxError
		msg := err.Error()
		if errors.As(err, &se) {
			msg = fmt.Sprintf("byte %d: %s", se.Offset, se.Msg)
		}
		return Operation{}, &DecodeError{Code: CodeNotJSON, Msg: msg, Err: err}
	}
	if root.kind != jsonObject {
		return Operation{}, &DecodeError{Code: CodeNotJSON, Msg: "command must be a JSON object, got " + root.kindName()}
	}
	return d.decodeEnvelope(st)
}

// DecodeCommand validates an already-split command, as Decode does for its
// JSON form.
func (d *Decoder) DecodeCommand(cmd Command) (Operation, error) {
	if len(cmd.Payload) == 0 {
		cmd.Payload = nil
	}
	body, err := json.Marshal(cmd)
	if err != nil {
		return Operation{}, &DecodeError{Code: CodeNotJSON, Field: "payload", Msg: "payload is not valid JSON", Err: ErrNotJSON}
	}
	return d.Decode(body)
}

// decodeState is the scratch space of one Decode call, pooled: nothing in it
// may end up in what Decode returns.
type decodeState struct {
	p     jsonParser
	arena []byte       // the strings an Operation keeps, copied once
	vals  []fieldValue // normalised payload fields, by field index
	boxed []any        // the same, boxed as Operation.Fields holds them
	canon []byte       // the RFC 8785 form that is fingerprinted
}

var decodeStates = sync.Pool{New: func() any { return new(decodeState) }}

// maxPooledBuffer is the largest buffer a decodeState keeps for reuse.
const maxPooledBuffer = 16 << 10

func (st *decodeState) release() {
	reuse := func(b []byte) []byte {
		if cap(b) > maxPooledBuffer {
			return nil
		}
		return b[:0]
	}
	st.p = jsonParser{esc: reuse(st.p.esc), env: st.p.env[:0], payload: st.p.payload[:0]}
	if cap(st.p.env) > 256 {
		st.p.env = nil
	}
	if cap(st.p.payload) > 256 {
		st.p.payload = nil
	}
	st.arena, st.canon = reuse(st.arena), reuse(st.canon)
	clear(st.vals) // drop references to the arena strings
	st.vals = st.vals[:0]
	clear(st.boxed) // and to the returned values
	st.boxed = st.boxed[:0]
	if cap(st.vals) > 256 {
		st.vals, st.boxed = nil, nil
	}
	decodeStates.Put(st)
}

// Command re-encodes the operation as a command envelope carrying its key,
// approval and normalised fields (insignificant ones included) (times in their canonical RFC 3339 UTC form).
// Decoding the result with the same env and registry gives back an equal
// Operation with the same fingerprint.
func (o Operation) Command() (Command, error) {
	payload := make(map[string]any, len(o.Fields)+len(o.Extra))
	for name, v := range o.Extra {
		payload[name] = v
	}
	for name, v := range o.Fields {
		if t, ok := v.(time.Time); ok {
			payload[name] = canonicalTime(t)
			continue
		}
		payload[name] = v
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return Command{}, fmt.Errorf("encode payload of %s: %w", o.Key, err)
	}
	return Command{
		EventID:       o.EventID,
		Operation:     o.Type,
		IntentID:      o.Key.IntentID,
		KeyVersion:    o.Key.Version,
		ApprovalID:    o.ApprovalID,
		ApprovalToken: o.ApprovalToken,
		OperationKey:  o.Key.String(),
		Payload:       raw,
	}, nil
}
