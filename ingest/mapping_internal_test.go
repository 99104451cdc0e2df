package ingest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseMinor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		scale int
		want  int64
		bad   bool
	}{
		{"100.50", 2, 10050, false},
		{"100.5", 2, 10050, false},
		{"100", 2, 10000, false},
		{"0.01", 2, 1, false},
		{"0", 2, 0, false},
		{"007.10", 2, 710, false},
		{"1.500", 2, 150, false}, // extra zeros are fine
		{"1.005", 2, 0, true},    // a fraction of a kopeck is not
		{"-5.25", 2, -525, false},
		{"12.3456", 4, 123456, false},
		{"12", 0, 12, false},
		{"12.0", 0, 12, false},
		{"92233720368547758.07", 2, 0, true}, // past 18 digits
		{"999999999999999999", 0, 999999999999999999, false},
		{"1e3", 2, 0, true},
		{"", 2, 0, true},
		{".5", 2, 0, true},
		{"5.", 2, 0, true},
		{"+5", 2, 0, true},
		{"5,00", 2, 0, true},
		{"--5", 2, 0, true},
	}
	for _, tt := range tests {
		got, err := parseMinor(tt.in, tt.scale)
		if tt.bad {
			require.Error(t, err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
}

func TestConvert(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		v    any
		f    FieldMap
		want any
		bad  bool
	}{
		{"as is", json.Number("1.5"), FieldMap{}, json.Number("1.5"), false},
		{"number to string", json.Number("4711"), FieldMap{Convert: ConvertString}, "4711", false},
		{"bool to string", true, FieldMap{Convert: ConvertString}, "true", false},
		{"object to string", map[string]any{}, FieldMap{Convert: ConvertString}, nil, true},
		{"string to int", "42", FieldMap{Convert: ConvertInt}, json.Number("42"), false},
		{"fraction to int", json.Number("4.2"), FieldMap{Convert: ConvertInt}, nil, true},
		{"minor units from number", json.Number("19.99"), FieldMap{Convert: ConvertMinorUnits, Scale: 2}, json.Number("1999"), false},
		{"minor units from bool", false, FieldMap{Convert: ConvertMinorUnits, Scale: 2}, nil, true},
	}
	for _, tt := range tests {
		got, err := convert(tt.v, tt.f)
		if tt.bad {
			require.Error(t, err, tt.name)
			continue
		}
		require.NoError(t, err, tt.name)
		require.Equal(t, tt.want, got, tt.name)
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	doc, err := parseBody([]byte(`{"a":{"b":[{"c":"x"},null]},"n":null,"z":0}`))
	require.NoError(t, err)
	v, ok := lookup(doc, "a.b.0.c")
	require.True(t, ok)
	require.Equal(t, "x", v)
	for _, p := range []string{"a.b.1", "a.b.2", "a.b.-1", "a.b.x", "n", "missing", "a.b.0.c.d", "z.y"} {
		_, ok := lookup(doc, p)
		require.False(t, ok, p)
	}
	s, ok := lookupString(doc, "z")
	require.True(t, ok)
	require.Equal(t, "0", s)
	_, err = parseBody([]byte(`{"a":1} {"b":2}`))
	require.Error(t, err)
	_, err = parseBody([]byte(`{"secret-value":`))
	require.Error(t, err)
	require.NotContains(t, err.Error(), "secret-value")
}
