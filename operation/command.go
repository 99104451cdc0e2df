package operation

import (
	"encoding/json"
	"errors"
	"fmt"
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
	// ApprovalID approves a money-moving operation; stored, not fingerprinted.
	ApprovalID string `json:"approval_id,omitempty"`
	// OperationKey, when the orchestrator made the key itself, must parse and
	// match the daemon's env and the operation.
	OperationKey string `json:"operation_key,omitempty"`
	// Payload holds the operation's fields.
	Payload json.RawMessage `json:"payload"`
}

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
// (plus transport fields, dropped), each normalised by its kind; approval_id
// is required for types that RequiresApproval.
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
	root, err := parseJSON(body, false)
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
	return d.decodeEnvelope(root)
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

// envelopeField is one string member of the envelope as read.
type envelopeField struct {
	value   string
	present bool // present and not null
	bad     bool // wrong type or duplicated: unusable for key derivation
}

type envelope struct {
	fields  map[string]*envelopeField
	payload *jsonValue
}

var envelopeStrings = []string{"event_id", "operation", "intent_id", "key_version", "approval_id", "operation_key"}

func (d *Decoder) decodeEnvelope(root jsonValue) (Operation, error) {
	reg := d.registry()
	env := envelope{fields: make(map[string]*envelopeField, len(envelopeStrings))}
	for _, n := range envelopeStrings {
		env.fields[n] = &envelopeField{}
	}
	var first *DecodeError
	note := func(e *DecodeError) {
		if first == nil {
			first = e
		}
	}
	seen := make(map[string]bool, len(root.members))
	payloadBad := false
	for i := range root.members {
		m := &root.members[i]
		if seen[m.name] {
			note(&DecodeError{Code: CodeInvalidField, Field: safeFieldName("", m.name),
				Msg: "duplicate member name in the envelope"})
			if f, ok := env.fields[m.name]; ok {
				f.bad = true
			}
			if m.name == "payload" {
				payloadBad = true
			}
			continue
		}
		seen[m.name] = true
		if f, ok := env.fields[m.name]; ok {
			switch m.value.kind {
			case jsonString:
				f.value, f.present = m.value.text, true
			case jsonNull:
			default:
				f.bad = true
				note(&DecodeError{Code: CodeInvalidField, Field: m.name,
					Msg: "must be a string, got " + m.value.kindName()})
			}
			continue
		}
		switch {
		case m.name == "payload":
			env.payload = &m.value
		case isTransportField(m.name):
		default:
			note(&DecodeError{Code: CodeInvalidField, Field: safeFieldName("", m.name),
				Msg: "unknown member in the envelope"})
		}
	}
	if payloadBad {
		env.payload = nil
	}

	// Build the Command as far as it can be read, and derive the key early so
	// that every later rejection can carry it.
	get := func(n string) string {
		if f := env.fields[n]; f.present && !f.bad {
			return f.value
		}
		return ""
	}
	cmd := Command{
		EventID: get("event_id"), Operation: get("operation"), IntentID: get("intent_id"),
		KeyVersion: get("key_version"), ApprovalID: get("approval_id"), OperationKey: get("operation_key"),
	}
	eventID := ""
	if cmd.EventID != "" && ValidateID("event_id", cmd.EventID) == nil {
		eventID = cmd.EventID
	}
	typ, registered := reg.Lookup(cmd.Operation)
	opName := ""
	if registered {
		opName = typ.Name
	}
	key, keyErr := deriveKey(d.Env, cmd, reg)
	keyStr := ""
	if keyErr == nil {
		keyStr = key.String()
	} else if !errors.Is(keyErr, ErrBadKey) && !errors.Is(keyErr, ErrKeyMismatch) &&
		!errors.Is(keyErr, ErrUnknownOperation) && !errors.Is(keyErr, ErrMissingField) {
		return Operation{}, keyErr // configuration, not input
	}
	if keyErr != nil && cmd.OperationKey != "" {
		// The orchestrator's key was refused; publish under the key the
		// daemon would have derived, if that one is sound.
		alt := cmd
		alt.OperationKey = ""
		if k, err := deriveKey(d.Env, alt, reg); err == nil {
			keyStr = k.String()
		}
	}
	reject := func(e *DecodeError) (Operation, error) {
		e.Key, e.EventID, e.Operation = keyStr, eventID, opName
		return Operation{}, e
	}

	if first != nil {
		return reject(first)
	}
	if cmd.EventID == "" {
		return reject(&DecodeError{Code: CodeMissingField, Field: "event_id", Msg: "required"})
	}
	if err := ValidateID("event_id", cmd.EventID); err != nil {
		return reject(&DecodeError{Code: CodeInvalidField, Field: "event_id", Msg: keyReason(err)})
	}
	if cmd.Operation == "" {
		return reject(&DecodeError{Code: CodeMissingField, Field: "operation", Msg: "required"})
	}
	if !registered {
		msg := "not a registered operation"
		if ValidateOperationName(cmd.Operation) == nil && secretReason(cmd.Operation) == "" {
			msg = "operation " + cmd.Operation + " is not registered"
		}
		return reject(&DecodeError{Code: CodeUnknownOperation, Field: "operation", Msg: msg})
	}
	if keyErr != nil {
		var de *DecodeError
		if errors.As(keyErr, &de) {
			return reject(de)
		}
		return reject(&DecodeError{Code: CodeBadKey, Msg: keyErr.Error(), Err: keyErr})
	}
	if cmd.ApprovalID != "" {
		if err := ValidateID("approval_id", cmd.ApprovalID); err != nil {
			return reject(&DecodeError{Code: CodeInvalidField, Field: "approval_id", Msg: keyReason(err)})
		}
	}
	if env.payload == nil || env.payload.kind == jsonNull {
		return reject(&DecodeError{Code: CodeMissingField, Field: "payload", Msg: "required"})
	}
	if env.payload.kind != jsonObject {
		return reject(&DecodeError{Code: CodeInvalidField, Field: "payload",
			Msg: "must be an object, got " + env.payload.kindName()})
	}
	fields, ferr := normalizePayload(typ, *env.payload)
	if ferr != nil {
		return reject(ferr)
	}
	if typ.RequiresApproval && cmd.ApprovalID == "" {
		return reject(&DecodeError{Code: CodeMissingField, Field: "approval_id",
			Msg: "required: " + typ.Name + " moves money and needs an approval"})
	}
	fp, err := Fingerprint(typ.Name, fields)
	if err != nil {
		// normalizePayload only produces fingerprintable values.
		return reject(&DecodeError{Code: CodeInvalidField, Field: "payload", Msg: "cannot be fingerprinted", Err: err})
	}
	return Operation{
		Key:          key,
		EventID:      cmd.EventID,
		Type:         typ.Name,
		TargetSystem: typ.TargetSystem,
		ApprovalID:   cmd.ApprovalID,
		Fields:       fields,
		Fingerprint:  fp,
	}, nil
}

// keyReason is the safe reason of a *KeyError (or the error text otherwise).
func keyReason(err error) string {
	var ke *KeyError
	if errors.As(err, &ke) {
		return ke.Reason
	}
	return err.Error()
}

// DeriveKey returns the operation key of a command:
// <env>:<operation>:<intent_id>:<key_version>, where intent_id defaults to
// event_id and key_version to DefaultKeyVersion. When the command carries
// operation_key, that key is used: it must parse, and its env and operation
// must equal env and cmd.Operation, as must its intent and version those of
// the command when the command states them.
//
// reg nil means the default registry. Errors are *DecodeError (codes
// unknown_operation, missing_field, bad_key, key_mismatch), except an invalid
// env, which wraps ErrInvalidConfig.
func DeriveKey(env string, cmd Command, reg *Registry) (Key, error) {
	if reg == nil {
		reg = defaultRegistry
	}
	return deriveKey(env, cmd, reg)
}

func deriveKey(env string, cmd Command, reg *Registry) (Key, error) {
	if err := ValidateEnv(env); err != nil {
		return Key{}, fmt.Errorf("%w: env: %w", ErrInvalidConfig, err)
	}
	if cmd.Operation == "" {
		return Key{}, &DecodeError{Code: CodeMissingField, Field: "operation", Msg: "required"}
	}
	if _, ok := reg.Lookup(cmd.Operation); !ok {
		return Key{}, &DecodeError{Code: CodeUnknownOperation, Field: "operation", Msg: "not a registered operation"}
	}
	if cmd.OperationKey != "" {
		k, err := ParseKey(cmd.OperationKey)
		if err != nil {
			return Key{}, &DecodeError{Code: CodeBadKey, Field: "operation_key", Msg: keyReason(err), Err: err}
		}
		switch {
		case k.Env != env:
			return Key{}, &DecodeError{Code: CodeKeyMismatch, Field: "operation_key",
				Msg: "env part differs from this daemon's env " + env}
		case k.Operation != cmd.Operation:
			return Key{}, &DecodeError{Code: CodeKeyMismatch, Field: "operation_key",
				Msg: "operation part differs from the command's operation"}
		case cmd.IntentID != "" && k.IntentID != cmd.IntentID:
			return Key{}, &DecodeError{Code: CodeKeyMismatch, Field: "operation_key",
				Msg: "intent part differs from the command's intent_id"}
		case cmd.KeyVersion != "" && k.Version != cmd.KeyVersion:
			return Key{}, &DecodeError{Code: CodeKeyMismatch, Field: "operation_key",
				Msg: "version part differs from the command's key_version"}
		}
		return k, nil
	}
	intent, intentField := cmd.IntentID, "intent_id"
	if intent == "" {
		intent, intentField = cmd.EventID, "event_id"
	}
	if intent == "" {
		return Key{}, &DecodeError{Code: CodeMissingField, Field: "event_id", Msg: "required"}
	}
	version := cmd.KeyVersion
	if version == "" {
		version = DefaultKeyVersion
	}
	if err := ValidateVersion(version); err != nil {
		return Key{}, &DecodeError{Code: CodeBadKey, Field: "key_version", Msg: keyReason(err), Err: err}
	}
	if err := validateIntent(intent); err != nil {
		return Key{}, &DecodeError{Code: CodeBadKey, Field: intentField, Msg: keyReason(err), Err: err}
	}
	k := Key{Env: env, Operation: cmd.Operation, IntentID: intent, Version: version}
	if err := checkKeyString(k.String()); err != nil {
		return Key{}, &DecodeError{Code: CodeBadKey, Field: intentField, Msg: keyReason(err), Err: err}
	}
	return k, nil
}

// Command re-encodes the operation as a command envelope carrying its key,
// approval and normalised fields (times in their canonical RFC 3339 UTC form).
// Decoding the result with the same env and registry gives back an equal
// Operation with the same fingerprint.
func (o Operation) Command() (Command, error) {
	payload := make(map[string]any, len(o.Fields))
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
		EventID:      o.EventID,
		Operation:    o.Type,
		IntentID:     o.Key.IntentID,
		KeyVersion:   o.Key.Version,
		ApprovalID:   o.ApprovalID,
		OperationKey: o.Key.String(),
		Payload:      raw,
	}, nil
}
