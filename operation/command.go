package operation

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// Envelope members, as bits of a seen-set.
const (
	envEventID = iota
	envOperation
	envIntentID
	envKeyVersion
	envApprovalID
	envOperationKey
	envStrings   // the string members above
	envPayload   = envStrings
	envTransport = envPayload + 1 // first of the transport fields
)

var envelopeStrings = [envStrings]string{"event_id", "operation", "intent_id", "key_version", "approval_id", "operation_key"}

// envelopeMember returns the bit of a known envelope member name, or -1.
func envelopeMember(name []byte) int {
	switch string(name) {
	case "event_id":
		return envEventID
	case "operation":
		return envOperation
	case "intent_id":
		return envIntentID
	case "key_version":
		return envKeyVersion
	case "approval_id":
		return envApprovalID
	case "operation_key":
		return envOperationKey
	case "payload":
		return envPayload
	}
	if t := transportIndex(name); t >= 0 {
		return envTransport + t
	}
	return -1
}

// transportIndex returns the index of a transport field name in
// TransportFields' original order, or -1.
func transportIndex(name []byte) int {
	switch string(name) {
	case "attempt":
		return 0
	case "sent_at":
		return 1
	case "trace_id":
		return 2
	case "traceparent":
		return 3
	case "tracestate":
		return 4
	}
	return -1
}

// envelopeField is one string member of the envelope as read.
type envelopeField struct {
	text    span
	present bool // present and not null
	bad     bool // wrong type or duplicated: unusable for key derivation
	off     int  // the value's place in the arena
}

func (d *Decoder) decodeEnvelope(st *decodeState) (Operation, error) {
	reg := d.registry()
	p := &st.p
	var env [envStrings]envelopeField
	var first *DecodeError
	note := func(e *DecodeError) {
		if first == nil {
			first = e
		}
	}
	// Only known names need a seen-set: an unknown name is reported at its
	// first appearance, which its repetitions cannot precede.
	var seen uint32
	payload := -1
	payloadBad := false
	for i := range p.env {
		m := &p.env[i]
		name := p.bytesOf(m.name)
		bit := envelopeMember(name)
		if bit < 0 {
			note(&DecodeError{Code: CodeInvalidField, Field: safeFieldName("", string(name)),
				Msg: "unknown member in the envelope"})
			continue
		}
		if seen&(1<<bit) != 0 {
			note(&DecodeError{Code: CodeInvalidField, Field: safeFieldName("", string(name)),
				Msg: "duplicate member name in the envelope"})
			if bit < envStrings {
				env[bit].bad = true
			}
			if bit == envPayload {
				payloadBad = true
			}
			continue
		}
		seen |= 1 << bit
		switch {
		case bit < envStrings:
			f := &env[bit]
			switch m.val.kind {
			case jsonString:
				f.text, f.present = m.val.text, true
			case jsonNull:
			default:
				f.bad = true
				note(&DecodeError{Code: CodeInvalidField, Field: envelopeStrings[bit],
					Msg: "must be a string, got " + m.val.kindName()})
			}
		case bit == envPayload:
			payload = i
		}
	}
	if payloadBad {
		payload = -1
	}

	// Copy the strings the Operation keeps into one arena: the usable
	// envelope strings, and the string values of the payload's fields.
	arena := st.arena[:0]
	for i := range env {
		if f := &env[i]; f.present && !f.bad {
			f.off = len(arena)
			arena = append(arena, p.bytesOf(f.text)...)
		}
	}
	var typ *registeredType
	if f := &env[envOperation]; f.present && !f.bad {
		typ = reg.lookup(string(arena[f.off : f.off+f.text.end-f.text.off]))
	}
	var members []flatMember
	if payload >= 0 {
		if v := p.env[payload].val; v.kind == jsonObject {
			members = p.payload[v.from:v.to]
		}
	}
	if typ != nil {
		for k := range members {
			m := &members[k]
			m.field = typ.fieldIndex(p.bytesOf(m.name))
			if m.field < 0 || m.val.kind != jsonString {
				continue
			}
			m.str = len(arena)
			arena = append(arena, p.bytesOf(m.val.text)...)
			if typ.Fields[m.field].Kind == KindCurrency {
				upperASCII(arena[m.str:])
			}
		}
	}
	st.arena = arena
	as := string(arena)
	get := func(i int) string {
		if f := &env[i]; f.present && !f.bad {
			return as[f.off : f.off+f.text.end-f.text.off]
		}
		return ""
	}

	// Build the Command as far as it can be read, and derive the key early so
	// that every later rejection can carry it.
	cmd := Command{
		EventID: get(envEventID), Operation: get(envOperation), IntentID: get(envIntentID),
		KeyVersion: get(envKeyVersion), ApprovalID: get(envApprovalID), OperationKey: get(envOperationKey),
	}
	eventID := ""
	if cmd.EventID != "" && ValidateID("event_id", cmd.EventID) == nil {
		eventID = cmd.EventID
	}
	opName := ""
	if typ != nil {
		opName = typ.Name
	}
	key, keyErr := deriveKey(d.Env, cmd, reg)
	altKey := ""
	if keyErr != nil && !errors.Is(keyErr, ErrBadKey) && !errors.Is(keyErr, ErrKeyMismatch) &&
		!errors.Is(keyErr, ErrUnknownOperation) && !errors.Is(keyErr, ErrMissingField) {
		return Operation{}, keyErr // configuration, not input
	}
	if keyErr != nil && cmd.OperationKey != "" {
		// The orchestrator's key was refused; publish under the key the
		// daemon would have derived, if that one is sound.
		alt := cmd
		alt.OperationKey = ""
		if k, err := deriveKey(d.Env, alt, reg); err == nil {
			altKey = k.String()
		}
	}
	reject := func(e *DecodeError) (Operation, error) {
		e.Key, e.EventID, e.Operation = altKey, eventID, opName
		if keyErr == nil {
			e.Key = key.String()
		}
		return Operation{}, e
	}

	if first != nil {
		return reject(first)
	}
	if cmd.EventID == "" {
		return reject(&DecodeError{Code: CodeMissingField, Field: "event_id", Msg: "required"})
	}
	if eventID == "" {
		err := ValidateID("event_id", cmd.EventID)
		return reject(&DecodeError{Code: CodeInvalidField, Field: "event_id", Msg: keyReason(err)})
	}
	if cmd.Operation == "" {
		return reject(&DecodeError{Code: CodeMissingField, Field: "operation", Msg: "required"})
	}
	if typ == nil {
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
	if payload < 0 || p.env[payload].val.kind == jsonNull {
		return reject(&DecodeError{Code: CodeMissingField, Field: "payload", Msg: "required"})
	}
	if pv := p.env[payload].val; pv.kind != jsonObject {
		return reject(&DecodeError{Code: CodeInvalidField, Field: "payload",
			Msg: "must be an object, got " + pv.kindName()})
	}
	vals := slices.Grow(st.vals[:0], len(typ.Fields))[:len(typ.Fields)]
	clear(vals)
	st.vals = vals
	if ferr := normalizePayload(typ, p, members, as, vals); ferr != nil {
		return reject(ferr)
	}
	if typ.RequiresApproval && cmd.ApprovalID == "" {
		return reject(&DecodeError{Code: CodeMissingField, Field: "approval_id",
			Msg: "required: " + typ.Name + " moves money and needs an approval"})
	}

	// The fields, boxed once for Operation.Fields, and the fingerprint: the
	// RFC 8785 form of {"operation": type} and the fields, written from the
	// boxed values in the type's precomputed member order.
	fields := make(map[string]any, len(typ.Fields))
	var extra map[string]any
	boxed := slices.Grow(st.boxed[:0], len(typ.Fields))[:len(typ.Fields)]
	st.boxed = boxed
	for i := range typ.Fields {
		if vals[i].present {
			boxed[i] = vals[i].value(typ.Fields[i].Kind)
			if typ.Fields[i].Insignificant {
				if extra == nil {
					extra = make(map[string]any)
				}
				extra[typ.Fields[i].Name] = boxed[i]
				continue
			}
			fields[typ.Fields[i].Name] = boxed[i]
		}
	}
	var err error
	c := append(st.canon[:0], '{')
	for _, i := range typ.canon {
		if i >= 0 && !vals[i].present {
			continue
		}
		if c[len(c)-1] != '{' {
			c = append(c, ',')
		}
		if i < 0 {
			c = append(c, `"operation":`...)
			c = appendJCSString(c, typ.Name)
			continue
		}
		c = appendJCSString(c, typ.Fields[i].Name)
		c = append(c, ':')
		if c, err = appendCanonical(c, boxed[i]); err != nil {
			return Operation{}, fmt.Errorf("fingerprint %s: %w", typ.Name, err) // normalised values always have a form
		}
	}
	c = append(c, '}')
	st.canon = c
	sum := sha256.Sum256(c)
	var fp [2 * sha256.Size]byte
	hex.Encode(fp[:], sum[:])

	return Operation{
		Key:          key,
		EventID:      cmd.EventID,
		Type:         typ.Name,
		TargetSystem: typ.TargetSystem,
		ApprovalID:   cmd.ApprovalID,
		Fields:       fields,
		Extra:        extra,
		Fingerprint:  string(fp[:]),
	}, nil
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
		EventID:      o.EventID,
		Operation:    o.Type,
		IntentID:     o.Key.IntentID,
		KeyVersion:   o.Key.Version,
		ApprovalID:   o.ApprovalID,
		OperationKey: o.Key.String(),
		Payload:      raw,
	}, nil
}
