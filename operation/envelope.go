package operation

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
)

// Envelope members, as bits of a seen-set.
const (
	envEventID = iota
	envOperation
	envIntentID
	envKeyVersion
	envApprovalID
	envOperationKey
	envApprovalToken
	envStrings   // the string members above
	envPayload   = envStrings
	envTransport = envPayload + 1 // first of the transport fields
)

var envelopeStrings = [envStrings]string{"event_id", "operation", "intent_id", "key_version", "approval_id", "operation_key", "approval_token"}

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
	case "approval_token":
		return envApprovalToken
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

// usable reports whether the member can be read: present, a string, once.
func (f *envelopeField) usable() bool { return f.present && !f.bad }

// envelope is a command's envelope as read: its string members, where its
// payload is, and the first thing wrong with it.
type envelope struct {
	str     [envStrings]envelopeField
	payload int // index of the payload member in jsonParser.env, or -1
	// first is the first problem met while reading; it is reported once
	// the key is known, so that the rejection can carry it.
	first *DecodeError
}

func (e *envelope) note(de *DecodeError) {
	if e.first == nil {
		e.first = de
	}
}

// get returns string member i from the arena, or "" when it is unusable.
func (e *envelope) get(as string, i int) string {
	if f := &e.str[i]; f.usable() {
		return as[f.off : f.off+f.text.end-f.text.off]
	}
	return ""
}

// decodeEnvelope turns a scanned command into an Operation, in steps: read
// the envelope's members, copy the strings the Operation keeps, derive the
// key (so that every rejection carries it), check the envelope, normalise
// the payload, and fingerprint the fields.
func (d *Decoder) decodeEnvelope(st *decodeState) (Operation, error) {
	reg := d.registry()
	p := &st.p
	var e envelope
	e.read(p)
	typ, members, as := e.intern(st, reg)
	cmd := Command{
		EventID: e.get(as, envEventID), Operation: e.get(as, envOperation), IntentID: e.get(as, envIntentID),
		KeyVersion: e.get(as, envKeyVersion), ApprovalID: e.get(as, envApprovalID), OperationKey: e.get(as, envOperationKey),
		ApprovalToken: e.get(as, envApprovalToken),
	}
	id, err := d.identify(cmd, typ, reg)
	if err != nil {
		return Operation{}, err // configuration, not input
	}
	if de := e.check(p, &cmd, typ, &id); de != nil {
		return id.reject(de)
	}
	vals := slices.Grow(st.vals[:0], len(typ.Fields))[:len(typ.Fields)]
	clear(vals)
	st.vals = vals
	if de := normalizePayload(typ, p, members, as, vals); de != nil {
		return id.reject(de)
	}
	fields, extra, fp, err := boxFields(st, typ, vals)
	if err != nil {
		return Operation{}, err
	}
	return Operation{
		Key:           id.key,
		EventID:       cmd.EventID,
		Type:          typ.Name,
		TargetSystem:  typ.TargetSystem,
		ApprovalID:    cmd.ApprovalID,
		ApprovalToken: cmd.ApprovalToken,
		Fields:        fields,
		Extra:         extra,
		Fingerprint:   fp,
	}, nil
}

// read sorts the envelope's members: the text of each known string member
// and the payload's place; an unknown, duplicated or mistyped member is
// noted, and a duplicated one made unusable. Only known names need a
// seen-set: an unknown name is reported at its first appearance, which its
// repetitions cannot precede.
func (e *envelope) read(p *jsonParser) {
	var seen uint32
	e.payload = -1
	payloadBad := false
	for i := range p.env {
		m := &p.env[i]
		name := p.bytesOf(m.name)
		bit := envelopeMember(name)
		if bit < 0 {
			e.note(&DecodeError{Code: CodeInvalidField, Field: safeFieldName("", string(name)),
				Msg: "unknown member in the envelope"})
			continue
		}
		if seen&(1<<bit) != 0 {
			e.note(&DecodeError{Code: CodeInvalidField, Field: safeFieldName("", string(name)),
				Msg: "duplicate member name in the envelope"})
			if bit < envStrings {
				e.str[bit].bad = true
			}
			if bit == envPayload {
				payloadBad = true
			}
			continue
		}
		seen |= 1 << bit
		switch {
		case bit < envStrings:
			f := &e.str[bit]
			switch m.val.kind {
			case jsonString:
				f.text, f.present = m.val.text, true
			case jsonNull:
			default:
				f.bad = true
				e.note(&DecodeError{Code: CodeInvalidField, Field: envelopeStrings[bit],
					Msg: "must be a string, got " + m.val.kindName()})
			}
		case bit == envPayload:
			e.payload = i
		}
	}
	if payloadBad {
		e.payload = -1
	}
}

// intern copies the strings the Operation keeps into one arena, st.arena:
// the usable envelope strings and, when the operation is registered, the
// string values of the payload's fields (a currency upper-cased). It
// returns the registered type (nil when unknown), the payload's members
// (each given its field index) and the arena as a string.
func (e *envelope) intern(st *decodeState, reg *Registry) (*registeredType, []flatMember, string) {
	p := &st.p
	arena := st.arena[:0]
	for i := range e.str {
		if f := &e.str[i]; f.usable() {
			f.off = len(arena)
			arena = append(arena, p.bytesOf(f.text)...)
		}
	}
	var typ *registeredType
	if f := &e.str[envOperation]; f.usable() {
		typ = reg.lookup(string(arena[f.off : f.off+f.text.end-f.text.off]))
	}
	var members []flatMember
	if e.payload >= 0 {
		if v := p.env[e.payload].val; v.kind == jsonObject {
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
	return typ, members, string(arena)
}

// identity is what every rejection of a command carries: its key (or, when
// the orchestrator's key was refused, the key the daemon would have
// derived), its event id and its operation type, as far as they are sound.
type identity struct {
	key     Key
	keyErr  error
	altKey  string
	eventID string
	opName  string
}

// identify derives the command's key early, so that every later rejection
// can carry it. An error is the Decoder's configuration, not the input.
func (d *Decoder) identify(cmd Command, typ *registeredType, reg *Registry) (identity, error) {
	var id identity
	if cmd.EventID != "" && ValidateID("event_id", cmd.EventID) == nil {
		id.eventID = cmd.EventID
	}
	if typ != nil {
		id.opName = typ.Name
	}
	id.key, id.keyErr = deriveKey(d.Env, cmd, reg)
	if id.keyErr != nil && !errors.Is(id.keyErr, ErrBadKey) && !errors.Is(id.keyErr, ErrKeyMismatch) &&
		!errors.Is(id.keyErr, ErrUnknownOperation) && !errors.Is(id.keyErr, ErrMissingField) {
		return identity{}, id.keyErr
	}
	if id.keyErr != nil && cmd.OperationKey != "" {
		// The orchestrator's key was refused; publish under the key the
		// daemon would have derived, if that one is sound.
		alt := cmd
		alt.OperationKey = ""
		if k, err := deriveKey(d.Env, alt, reg); err == nil {
			id.altKey = k.String()
		}
	}
	return id, nil
}

// reject returns de carrying the command's identity.
func (id *identity) reject(de *DecodeError) (Operation, error) {
	de.Key, de.EventID, de.Operation = id.altKey, id.eventID, id.opName
	if id.keyErr == nil {
		de.Key = id.key.String()
	}
	return Operation{}, de
}

// check returns the first reason to refuse the envelope before its payload
// is read, in the order a sender fixes them: a problem met while reading,
// the event id, the operation, the key, the approval id, the payload's
// presence and type (id is the command's, from identify). nil when the
// envelope is sound and typ is known.
func (e *envelope) check(p *jsonParser, cmd *Command, typ *registeredType, id *identity) *DecodeError {
	if e.first != nil {
		return e.first
	}
	if cmd.EventID == "" {
		return &DecodeError{Code: CodeMissingField, Field: "event_id", Msg: "required"}
	}
	if id.eventID == "" {
		err := ValidateID("event_id", cmd.EventID)
		return &DecodeError{Code: CodeInvalidField, Field: "event_id", Msg: keyReason(err)}
	}
	if cmd.Operation == "" {
		return &DecodeError{Code: CodeMissingField, Field: "operation", Msg: "required"}
	}
	if typ == nil {
		msg := "not a registered operation"
		if ValidateOperationName(cmd.Operation) == nil && secretReason(cmd.Operation) == "" {
			msg = "operation " + cmd.Operation + " is not registered"
		}
		return &DecodeError{Code: CodeUnknownOperation, Field: "operation", Msg: msg}
	}
	if id.keyErr != nil {
		var de *DecodeError
		if errors.As(id.keyErr, &de) {
			return de
		}
		return &DecodeError{Code: CodeBadKey, Msg: id.keyErr.Error(), Err: id.keyErr}
	}
	if cmd.ApprovalID != "" {
		if err := ValidateID("approval_id", cmd.ApprovalID); err != nil {
			return &DecodeError{Code: CodeInvalidField, Field: "approval_id", Msg: keyReason(err)}
		}
	}
	if len(cmd.ApprovalToken) > MaxApprovalTokenLen {
		return &DecodeError{Code: CodeInvalidField, Field: "approval_token", Msg: fmt.Sprintf("longer than %d bytes", MaxApprovalTokenLen)}
	}
	if e.payload < 0 || p.env[e.payload].val.kind == jsonNull {
		return &DecodeError{Code: CodeMissingField, Field: "payload", Msg: "required"}
	}
	if pv := p.env[e.payload].val; pv.kind != jsonObject {
		return &DecodeError{Code: CodeInvalidField, Field: "payload", Msg: "must be an object, got " + pv.kindName()}
	}
	return nil
}

// boxFields boxes the normalised fields once, for Operation.Fields and
// Extra (the insignificant ones), and returns the fingerprint: the hex
// SHA-256 of the RFC 8785 form of {"operation": type} and the significant
// fields, written from the boxed values in the type's precomputed member
// order.
func boxFields(st *decodeState, typ *registeredType, vals []fieldValue) (fields, extra map[string]any, fp string, err error) {
	fields = make(map[string]any, len(typ.Fields))
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
			return nil, nil, "", fmt.Errorf("fingerprint %s: %w", typ.Name, err) // normalised values always have a form
		}
	}
	c = append(c, '}')
	st.canon = c
	sum := sha256.Sum256(c)
	var hexSum [2 * sha256.Size]byte
	hex.Encode(hexSum[:], sum[:])
	return fields, extra, string(hexSum[:]), nil
}
