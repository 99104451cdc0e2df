package bitrix24

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/idemgate/idemgate/adapters"
)

type errorBody struct {
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

// parseError reads an error body leniently.
func parseError(b []byte) errorBody {
	var e errorBody
	if json.Unmarshal(b, &e) != nil {
		return errorBody{}
	}
	return e
}

// safeCode keeps an error code only when it looks like one (A-Z, 0-9, _).
func safeCode(s string) string {
	if s == "" || len(s) > 64 {
		return "(none)"
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return "(malformed)"
		}
	}
	return s
}

// parseAddResult reads {"result": <id>} where id is a number or a numeric
// string.
func parseAddResult(b []byte) (string, error) {
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  string          `json:"error"`
	}
	if err := adapters.DecodeJSON(b, &r, adapters.ReconcileBeforeRetry, "Bitrix24 add answer"); err != nil {
		return "", err
	}
	if r.Error != "" {
		return "", adapters.Unexpected(adapters.ReconcileBeforeRetry, "Bitrix24 add answer: error %s with HTTP 200", safeCode(r.Error))
	}
	id, ok := idOf(r.Result)
	if !ok {
		return "", adapters.Unexpected(adapters.ReconcileBeforeRetry, "Bitrix24 add answer without a usable id")
	}
	return id, nil
}

func idOf(raw json.RawMessage) (string, bool) {
	s := strings.Trim(string(raw), `"`)
	n, err := strconv.ParseUint(s, 10, 63)
	if err != nil || n == 0 {
		return "", false
	}
	return strconv.FormatUint(n, 10), true
}

type listItem struct {
	id     string
	idNum  uint64
	fields map[string]json.RawMessage
}

func (it listItem) str(f string) string {
	raw, ok := it.fields[f]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(raw))
}

// parseList reads {"result":[{…}],"total":N,"next":M}.
func parseList(b []byte) ([]listItem, error) {
	items, _, err := parseListPage(b)
	return items, err
}

// parseListPage reads a list page and the start of the next one (-1: none).
func parseListPage(b []byte) ([]listItem, int, error) {
	var r struct {
		Result *[]map[string]json.RawMessage `json:"result"`
		Error  string                        `json:"error"`
		Next   *int                          `json:"next"`
	}
	if err := adapters.DecodeJSON(b, &r, adapters.ReconcileBeforeRetry, "Bitrix24 list answer"); err != nil {
		return nil, -1, err
	}
	if r.Error != "" || r.Result == nil {
		return nil, -1, adapters.Unexpected(adapters.ReconcileBeforeRetry, "Bitrix24 list answer without result")
	}
	next := -1
	if r.Next != nil && *r.Next > 0 {
		next = *r.Next
	}
	out := make([]listItem, 0, len(*r.Result))
	for _, f := range *r.Result {
		if f == nil {
			return nil, -1, adapters.Unexpected(adapters.ReconcileBeforeRetry, "Bitrix24 list item is not an object")
		}
		id, ok := idOf(f["ID"])
		if !ok {
			return nil, -1, adapters.Unexpected(adapters.ReconcileBeforeRetry, "Bitrix24 list item without a usable ID")
		}
		n, _ := strconv.ParseUint(id, 10, 64)
		out = append(out, listItem{id: id, idNum: n, fields: f})
	}
	return out, next, nil
}

// sameNumber compares decimal strings numerically ("1250" == "1250.00").
func sameNumber(a, b string) bool {
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	return err1 == nil && err2 == nil && x == y
}
