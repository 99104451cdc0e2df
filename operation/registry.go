package operation

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// FieldKind is the type of a payload field, which fixes how it is validated
// and normalised before fingerprinting.
type FieldKind int

// Field kinds.
const (
	// KindString is a JSON string kept exactly (not trimmed); valid UTF-8, no
	// control characters (tab, LF and CR are allowed when Field.Multiline),
	// at most Field.MaxLen characters. Stored as string.
	KindString FieldKind = iota + 1
	// KindMoney is an amount in minor units: a JSON integer (no fraction, no
	// exponent, not a string), positive (zero only with Field.AllowZero), at
	// most 2^53-1. Stored as int64.
	KindMoney
	// KindCurrency is a 3-letter ASCII currency code, stored upper-cased.
	KindCurrency
	// KindTime is an RFC 3339 timestamp with an offset ("Z" or ±hh:mm),
	// stored as time.Time in UTC; its canonical text is RFC 3339 in UTC with
	// trailing fractional zeros trimmed.
	KindTime
	// KindDate is a calendar date YYYY-MM-DD, stored as that string.
	KindDate
	// KindInt is a JSON integer within ±(2^53-1), stored as int64.
	KindInt
	// KindBool is a JSON boolean, stored as bool.
	KindBool
	// KindEnum is a JSON string that is one of Field.Enum exactly, stored
	// as string.
	KindEnum
	// KindObject is a JSON object whose members are Field.Fields, each
	// normalised by its own kind, stored as map[string]any (absent members
	// left out); its canonical form is RFC 8785 over those members.
	KindObject
)

var kindNames = map[FieldKind]string{
	KindString: "string", KindMoney: "money", KindCurrency: "currency",
	KindTime: "time", KindDate: "date", KindInt: "int", KindBool: "bool",
	KindEnum: "enum", KindObject: "object",
}

func (k FieldKind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("FieldKind(%d)", int(k))
}

// DefaultMaxLen is the length limit, in characters, of a string field whose
// MaxLen is 0.
const DefaultMaxLen = 256

// Field is one payload field of an operation type. A field is significant
// unless Insignificant is set: it is part of the fingerprint, so changing it
// makes a new intent. (Built-in types have significant fields only; types
// declared in configuration may add insignificant ones, see TypeDecl.)
type Field struct {
	// Name is the JSON member name in the payload: [a-z][a-z0-9_]*, at most 64
	// bytes, not "operation" and not a transport field.
	Name string
	// Kind fixes validation and normalisation.
	Kind FieldKind
	// Required fields must be present and non-null; a required string must be
	// non-empty. Optional fields may be absent or null (both mean absent).
	Required bool
	// MaxLen bounds a string field, in characters (0 = DefaultMaxLen).
	MaxLen int
	// AllowZero lets a money field be 0 (default: must be positive).
	AllowZero bool
	// Multiline lets a string field hold tab, LF and CR.
	Multiline bool
	// Enum lists the values of a KindEnum field (required for it, refused
	// for other kinds).
	Enum []string
	// Fields are the members of a KindObject field (required for it,
	// refused for other kinds). They follow the same rules, except that
	// they are all significant and not free text.
	Fields []Field
	// Insignificant fields are validated and normalised but left out of
	// the fingerprint and the field digests: a retry that changes one is
	// the same intent. They reach the adapter in Operation.Extra.
	Insignificant bool
	// FreeText marks a string field whose text may hold personal data
	// (a comment, an address): it must be insignificant, and it is held
	// in Operation.Extra, sent to the target only, never put in a result,
	// an error or a log. The decoder masks it (MaskText); every other
	// string field is refused when it holds a card number or a secret.
	FreeText bool
}

// significant reports whether f is part of the fingerprint.
func (f Field) significant() bool { return !f.Insignificant }

// Type is a registered operation type.
type Type struct {
	// Name is the operation, e.g. "payment.charge" (see ValidateOperationName).
	Name string
	// TargetSystem is the class of target: "1c", "crm" or "payments".
	TargetSystem string
	// Fields are the payload fields, all significant.
	Fields []Field
	// RequiresApproval types move money: by default (ApprovalPolicy) every
	// intent of the type waits for a person's approval.
	RequiresApproval bool
}

// Field returns the named field.
func (t Type) Field(name string) (Field, bool) {
	for _, f := range t.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// TransportFields are payload (and envelope) members that describe a delivery,
// not the intent. They are accepted and dropped: never validated, stored or
// fingerprinted.
var TransportFields = []string{"attempt", "sent_at", "trace_id", "traceparent", "tracestate"}

func isTransportField(name string) bool { return slices.Contains(TransportFields, name) }

// ErrDuplicateType is returned by Register for a name already registered.
var ErrDuplicateType = errors.New("operation type already registered")

// ErrInvalidType is returned by Register for an ill-formed Type.
var ErrInvalidType = errors.New("invalid operation type")

// Registry holds the operation types a daemon accepts. It is safe for
// concurrent use; the zero value is an empty registry.
type Registry struct {
	mu sync.Mutex // serialises Register
	// types is an immutable snapshot, replaced whole by Register, so that
	// the decoder reads it without locking.
	types atomic.Pointer[map[string]*registeredType]
}

// registeredType is a Type with the lookup tables the decoder uses.
type registeredType struct {
	Type
	// canon lists field indexes in RFC 8785 member order (names compared by
	// UTF-16 code units, which for ASCII names is byte order); -1 marks the
	// "operation" member.
	canon []int
	// index maps names to field indexes for types with many fields; small
	// types are searched linearly.
	index map[string]int
}

// linearFields is the field count up to which fieldIndex searches linearly.
const linearFields = 8

func newRegisteredType(t Type) *registeredType {
	rt := &registeredType{Type: t, canon: make([]int, 0, len(t.Fields)+1)}
	rt.canon = append(rt.canon, -1)
	for i := range t.Fields {
		if t.Fields[i].significant() {
			rt.canon = append(rt.canon, i)
		}
	}
	name := func(i int) string {
		if i < 0 {
			return "operation"
		}
		return t.Fields[i].Name
	}
	slices.SortFunc(rt.canon, func(a, b int) int { return strings.Compare(name(a), name(b)) })
	if len(t.Fields) > linearFields {
		rt.index = make(map[string]int, len(t.Fields))
		for i, f := range t.Fields {
			rt.index[f.Name] = i
		}
	}
	return rt
}

// fieldIndex returns the index of the named field, or -1.
func (t *registeredType) fieldIndex(name []byte) int {
	if t.index != nil {
		if i, ok := t.index[string(name)]; ok {
			return i
		}
		return -1
	}
	for i := range t.Fields {
		if t.Fields[i].Name == string(name) {
			return i
		}
	}
	return -1
}

// lookup returns the registered type, shared: callers must not modify it.
func (r *Registry) lookup(name string) *registeredType {
	if m := r.types.Load(); m != nil {
		return (*m)[name]
	}
	return nil
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

// DefaultRegistry returns a new registry holding the built-in types:
//
//	invoice.create  (1c)       order_id, customer_id, amount_minor, currency, [due_date date], [description]
//	invoice.cancel  (1c)       invoice_id, [order_id], [reason]
//	crm.task.create (crm)      title, responsible_id, [customer_id], [deadline time], [description]
//	crm.deal.create (crm)      title, customer_id, amount_minor (zero allowed), currency, [stage]
//	payment.charge  (payments) account_id, order_id, amount_minor, currency; needs approval_id
//	payment.refund  (payments) payment_id, [order_id], amount_minor, currency; needs approval_id
//
// Each call returns a fresh registry, so Register on it affects no one else.
func DefaultRegistry() *Registry {
	r := NewRegistry()
	for _, t := range builtinTypes() {
		if err := r.Register(t); err != nil {
			panic("operation: invalid built-in type: " + err.Error()) // a programming error, caught by tests
		}
	}
	return r
}

// The built-in operation types (DefaultRegistry), named here once for the
// adapters that perform them and the tools that send them.
const (
	TypeInvoiceCreate = "invoice.create"
	// TypeInvoiceCancel cancels an invoice with a cancelling document of
	// its own (the invoice stays, marked cancelled, beside the document
	// that cancels it): a legally meaningful operation, the compensation of
	// invoice.create, never a deletion.
	TypeInvoiceCancel = "invoice.cancel"
	TypeTaskCreate    = "crm.task.create"
	TypeDealCreate    = "crm.deal.create"
	TypePaymentCharge = "payment.charge"
	TypePaymentRefund = "payment.refund"
)

func builtinTypes() []Type {
	id := func(name string, required bool) Field {
		return Field{Name: name, Kind: KindString, Required: required, MaxLen: 128}
	}
	money := func(allowZero bool) Field {
		return Field{Name: "amount_minor", Kind: KindMoney, Required: true, AllowZero: allowZero}
	}
	currency := Field{Name: "currency", Kind: KindCurrency, Required: true}
	description := Field{Name: "description", Kind: KindString, MaxLen: 4000, Multiline: true}
	return []Type{
		{
			Name: TypeInvoiceCreate, TargetSystem: "1c",
			Fields: []Field{
				id("order_id", true), id("customer_id", true), money(false), currency,
				{Name: "due_date", Kind: KindDate},
				description,
			},
		},
		{
			Name: TypeInvoiceCancel, TargetSystem: "1c",
			Fields: []Field{
				id("invoice_id", true), id("order_id", false),
				{Name: "reason", Kind: KindString, MaxLen: 256},
			},
		},
		{
			Name: TypeTaskCreate, TargetSystem: "crm",
			Fields: []Field{
				{Name: "title", Kind: KindString, Required: true, MaxLen: 255},
				id("responsible_id", true), id("customer_id", false),
				{Name: "deadline", Kind: KindTime},
				description,
			},
		},
		{
			Name: TypeDealCreate, TargetSystem: "crm",
			Fields: []Field{
				{Name: "title", Kind: KindString, Required: true, MaxLen: 255},
				id("customer_id", true), money(true), currency,
				{Name: "stage", Kind: KindString, MaxLen: 64},
			},
		},
		{
			Name: TypePaymentCharge, TargetSystem: "payments", RequiresApproval: true,
			Fields: []Field{id("account_id", true), id("order_id", true), money(false), currency},
		},
		{
			Name: TypePaymentRefund, TargetSystem: "payments", RequiresApproval: true,
			Fields: []Field{id("payment_id", true), id("order_id", false), money(false), currency},
		},
	}
}

// Register adds a type. The name must be a valid operation name not yet
// registered; the target system 1–32 of [a-z0-9_-]; field names unique,
// [a-z][a-z0-9_]* of at most 64 bytes, neither "operation" nor a transport
// field; kinds known; MaxLen not negative.
func (r *Registry) Register(t Type) error {
	if err := validateType(t); err != nil {
		return err
	}
	t.Fields = cloneFields(t.Fields)
	r.mu.Lock()
	defer r.mu.Unlock()
	var old map[string]*registeredType
	if m := r.types.Load(); m != nil {
		old = *m
	}
	if _, ok := old[t.Name]; ok {
		return fmt.Errorf("register %s: %w", t.Name, ErrDuplicateType)
	}
	next := make(map[string]*registeredType, len(old)+1)
	maps.Copy(next, old)
	next[t.Name] = newRegisteredType(t)
	r.types.Store(&next)
	return nil
}

func validateType(t Type) error {
	if err := ValidateOperationName(t.Name); err != nil {
		return fmt.Errorf("%w: name: %w", ErrInvalidType, err)
	}
	if !ValidName(t.TargetSystem) {
		return fmt.Errorf("%w: %s: target system must be 1-32 of [a-z0-9_-]", ErrInvalidType, t.Name)
	}
	return validateFields(t.Name, "", t.Fields, false)
}

// maxObjectDepth bounds the nesting of object fields.
const maxObjectDepth = 4

// validateFields checks the fields of a type (prefix "") or of an object
// field (prefix "<field>.", nested true).
func validateFields(typ, prefix string, fields []Field, nested bool) error {
	if strings.Count(prefix, ".") > maxObjectDepth {
		return fmt.Errorf("%w: %s: object fields nested deeper than %d", ErrInvalidType, typ, maxObjectDepth)
	}
	seen := make(map[string]bool, len(fields))
	for _, f := range fields {
		if !validFieldName(f.Name) {
			return fmt.Errorf("%w: %s: field name must be [a-z][a-z0-9_]*, at most 64 bytes", ErrInvalidType, typ)
		}
		name := prefix + f.Name
		if !nested && (f.Name == "operation" || isTransportField(f.Name)) {
			return fmt.Errorf("%w: %s: field name %s is reserved", ErrInvalidType, typ, name)
		}
		if seen[f.Name] {
			return fmt.Errorf("%w: %s: field %s declared twice", ErrInvalidType, typ, name)
		}
		seen[f.Name] = true
		if _, ok := kindNames[f.Kind]; !ok {
			return fmt.Errorf("%w: %s: field %s: unknown kind %d", ErrInvalidType, typ, name, int(f.Kind))
		}
		if f.MaxLen < 0 {
			return fmt.Errorf("%w: %s: field %s: negative MaxLen", ErrInvalidType, typ, name)
		}
		if nested && (f.Insignificant || f.FreeText) {
			return fmt.Errorf("%w: %s: field %s: members of an object are significant and not free text", ErrInvalidType, typ, name)
		}
		if f.FreeText && (f.Kind != KindString || f.significant()) {
			return fmt.Errorf("%w: %s: field %s: free text must be an insignificant string", ErrInvalidType, typ, name)
		}
		if (f.Kind == KindEnum) != (len(f.Enum) > 0) {
			return fmt.Errorf("%w: %s: field %s: an enum field, and only one, lists its values", ErrInvalidType, typ, name)
		}
		enum := make(map[string]bool, len(f.Enum))
		for _, v := range f.Enum {
			if v == "" || len(v) > 64 || !utf8.ValidString(v) || enum[v] {
				return fmt.Errorf("%w: %s: field %s: enum values must be distinct, 1-64 bytes of UTF-8", ErrInvalidType, typ, name)
			}
			enum[v] = true
		}
		if (f.Kind == KindObject) != (len(f.Fields) > 0) {
			return fmt.Errorf("%w: %s: field %s: an object field, and only one, declares its fields", ErrInvalidType, typ, name)
		}
		if f.Kind == KindObject {
			if err := validateFields(typ, name+".", f.Fields, true); err != nil {
				return err
			}
		}
	}
	return nil
}

func validFieldName(s string) bool {
	if s == "" || len(s) > 64 || !(s[0] >= 'a' && s[0] <= 'z') {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Lookup returns the registered type with that name.
func (r *Registry) Lookup(name string) (Type, bool) {
	rt := r.lookup(name)
	if rt == nil {
		return Type{}, false
	}
	t := rt.Type
	t.Fields = cloneFields(t.Fields)
	return t, true
}

// Names returns the registered type names, sorted.
func (r *Registry) Names() []string {
	var types map[string]*registeredType
	if m := r.types.Load(); m != nil {
		types = *m
	}
	names := make([]string, 0, len(types))
	for n := range types {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// cloneFields deep-copies fields (enum values and object members included),
// so that a registered type cannot change under the decoder.
func cloneFields(fields []Field) []Field {
	out := slices.Clone(fields)
	for i := range out {
		out[i].Enum = slices.Clone(out[i].Enum)
		out[i].Fields = cloneFields(out[i].Fields)
	}
	return out
}
