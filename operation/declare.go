package operation

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// TypeDecl declares an operation type in configuration (operations: in the
// daemon's file), beside the built-in ones. Its fields follow the built-in
// rules: normalised by kind, significant ones fingerprinted in RFC 8785
// form. The struct tags are the configuration keys.
type TypeDecl struct {
	// TargetSystem is the class of target, 1-32 of [a-z0-9_-] ("warehouse").
	TargetSystem string `mapstructure:"target_system"`
	// ApprovalIDRequired types move money or goods: by default every intent
	// waits for a person's approval, as payment.charge does (the approval
	// policy, approvals.types, may say otherwise). The key keeps its name
	// from when a command had to carry an (unchecked) approval_id.
	ApprovalIDRequired bool `mapstructure:"approval_id_required"`
	// Fields are the payload fields, in order.
	Fields []FieldDecl `mapstructure:"fields"`
}

// FieldDecl declares one payload field.
type FieldDecl struct {
	// Name is the JSON member name: [a-z][a-z0-9_]*, at most 64 bytes.
	Name string `mapstructure:"name"`
	// Kind is one of DeclKinds: string, integer, money (minor units),
	// currency, date, time, enum, object, bool.
	Kind string `mapstructure:"kind"`
	// Required fields must be present and not null (a string not empty).
	Required bool `mapstructure:"required"`
	// Significant fields are part of the fingerprint: changing one under
	// the same key is a conflict. Default true, except for free text.
	Significant *bool `mapstructure:"significant"`
	// FreeText marks text that may hold personal data (a comment, an
	// address): never significant, never in results, errors or logs, and
	// masked (MaskText) where other strings refuse a card number or a secret.
	FreeText bool `mapstructure:"free_text"`
	// MaxLen bounds a string, in characters (default 256).
	MaxLen int `mapstructure:"max_len"`
	// AllowZero lets a money field be 0.
	AllowZero bool `mapstructure:"allow_zero"`
	// Multiline lets a string hold tab and line breaks (free text may).
	Multiline bool `mapstructure:"multiline"`
	// Values are an enum's values.
	Values []string `mapstructure:"values"`
	// Fields are an object's members (all significant, none free text).
	Fields []FieldDecl `mapstructure:"fields"`
}

// DeclKinds maps the kind names a declaration may use to field kinds.
var DeclKinds = map[string]FieldKind{
	"string": KindString, "integer": KindInt, "money": KindMoney, "currency": KindCurrency,
	"date": KindDate, "time": KindTime, "enum": KindEnum, "object": KindObject, "bool": KindBool,
}

// ErrUnsafeType is returned for a declaration that would weaken the
// guarantees (a free-text field in the fingerprint, no significant field):
// the daemon refuses to start with it.
var ErrUnsafeType = errors.New("unsafe operation type")

func declKindNames() string {
	names := make([]string, 0, len(DeclKinds))
	for n := range DeclKinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Type turns the declaration into a Type named name. Errors wrap
// ErrInvalidType (ill-formed) or ErrUnsafeType (unsafe), name the type and
// the field, and say what to change.
func (d TypeDecl) Type(name string) (Type, error) {
	t := Type{Name: name, TargetSystem: d.TargetSystem, RequiresApproval: d.ApprovalIDRequired}
	if err := ValidateOperationName(name); err != nil {
		return Type{}, fmt.Errorf("%w: operations.%s: %w", ErrInvalidType, name, err)
	}
	if !ValidName(d.TargetSystem) {
		return Type{}, fmt.Errorf("%w: operations.%s.target_system must be 1-32 of [a-z0-9_-]", ErrInvalidType, name)
	}
	fields, err := declFields(name, "", d.Fields, false)
	if err != nil {
		return Type{}, err
	}
	t.Fields = fields
	if !slices.ContainsFunc(fields, Field.significant) {
		return Type{}, fmt.Errorf("%w: operations.%s has no significant field: every retry and every other intent under a key would share one fingerprint, so a changed request could never be told apart (mark the fields that define the intent significant)", ErrUnsafeType, name)
	}
	if err := validateType(t); err != nil {
		return Type{}, fmt.Errorf("operations.%s: %w", name, err)
	}
	return t, nil
}

func declFields(typ, prefix string, decls []FieldDecl, nested bool) ([]Field, error) {
	out := make([]Field, 0, len(decls))
	for _, d := range decls {
		where := fmt.Sprintf("operations.%s.fields.%s%s", typ, prefix, d.Name)
		if d.Name == "" {
			where = fmt.Sprintf("operations.%s.fields.%s[%d]", typ, prefix, len(out))
		}
		k, ok := DeclKinds[d.Kind]
		if !ok {
			return nil, fmt.Errorf("%w: %s: unknown kind %q (known: %s)", ErrInvalidType, where, d.Kind, declKindNames())
		}
		significant := !d.FreeText
		if d.Significant != nil {
			significant = *d.Significant
		}
		switch {
		case d.FreeText && significant:
			return nil, fmt.Errorf("%w: %s is free text marked significant: free text (comments, addresses) changes between retries of one intent and may hold personal data, so it must not decide the fingerprint (drop significant: true)", ErrUnsafeType, where)
		case d.FreeText && k != KindString:
			return nil, fmt.Errorf("%w: %s: free text must be of kind string", ErrInvalidType, where)
		case nested && (!significant || d.FreeText):
			return nil, fmt.Errorf("%w: %s: members of an object are significant and not free text (declare the field at the top level)", ErrUnsafeType, where)
		case k == KindEnum && len(d.Values) == 0:
			return nil, fmt.Errorf("%w: %s: an enum lists its values", ErrInvalidType, where)
		case k != KindEnum && len(d.Values) > 0:
			return nil, fmt.Errorf("%w: %s: values belong to an enum field only", ErrInvalidType, where)
		case k == KindObject && len(d.Fields) == 0:
			return nil, fmt.Errorf("%w: %s: an object declares its fields", ErrInvalidType, where)
		case k != KindObject && len(d.Fields) > 0:
			return nil, fmt.Errorf("%w: %s: fields belong to an object field only", ErrInvalidType, where)
		case d.MaxLen < 0:
			return nil, fmt.Errorf("%w: %s: max_len must not be negative", ErrInvalidType, where)
		case d.AllowZero && k != KindMoney:
			return nil, fmt.Errorf("%w: %s: allow_zero belongs to a money field only", ErrInvalidType, where)
		case (d.MaxLen != 0 || d.Multiline) && k != KindString:
			return nil, fmt.Errorf("%w: %s: max_len and multiline belong to a string field only", ErrInvalidType, where)
		}
		f := Field{
			Name: d.Name, Kind: k, Required: d.Required, MaxLen: d.MaxLen, AllowZero: d.AllowZero,
			Multiline: d.Multiline || d.FreeText, Enum: slices.Clone(d.Values),
			Insignificant: !significant, FreeText: d.FreeText,
		}
		if d.FreeText && f.MaxLen == 0 {
			f.MaxLen = 4000
		}
		if k == KindObject {
			sub, err := declFields(typ, prefix+d.Name+".", d.Fields, true)
			if err != nil {
				return nil, err
			}
			f.Fields = sub
		}
		out = append(out, f)
	}
	return out, nil
}

// RegistryWith returns DefaultRegistry with the declared types added. A
// declaration that is ill-formed, unsafe or names a built-in type is an
// error; all are reported, in name order.
func RegistryWith(decls map[string]TypeDecl) (*Registry, error) {
	r := DefaultRegistry()
	names := make([]string, 0, len(decls))
	for n := range decls {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs []error
	for _, n := range names {
		if isBuiltin(n) {
			errs = append(errs, fmt.Errorf("%w: operations.%s is a built-in type; declare another name", ErrInvalidType, n))
			continue
		}
		t, err := decls[n].Type(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := r.Register(t); err != nil {
			errs = append(errs, fmt.Errorf("operations.%s: %w", n, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return r, nil
}

func isBuiltin(name string) bool {
	return slices.ContainsFunc(builtinTypes(), func(t Type) bool { return t.Name == name })
}

// FreeTextFields names the type's free-text fields (FieldDecl.FreeText):
// what adapters send to the target and nowhere else.
func (t Type) FreeTextFields() []string {
	var out []string
	for _, f := range t.Fields {
		if f.FreeText {
			out = append(out, f.Name)
		}
	}
	return out
}
