package bitrix24

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
)

// Operation types this adapter performs.
const (
	OpDealCreate = operation.TypeDealCreate
	OpTaskCreate = operation.TypeTaskCreate
)

// Adapter is the Bitrix24 adapter. It is safe for concurrent use.
type Adapter struct {
	cfg    Config
	code   redact.Secret
	client *adapters.Client
	locks  adapters.KeyLocks
}

var (
	_ adapters.Adapter  = (*Adapter)(nil)
	_ adapters.Admitter = (*Adapter)(nil)
)

// New validates cfg (after WithDefaults), resolves the webhook code and
// returns the adapter.
func New(cfg Config) (*Adapter, error) {
	cfg, code, err := adapters.ConfiguredSecret(cfg, adapters.Wrapping("bitrix24: webhook code: %w"))
	if err != nil {
		return nil, err
	}
	if strings.ContainsAny(code.Reveal(), "/?#% ") {
		return nil, fmt.Errorf("%w: webhook code must be a plain token", ErrInvalidConfig)
	}
	// The webhook code travels in the path (see call); no header carries it.
	return &Adapter{cfg: cfg, code: code, client: cfg.NewClient(nil)}, nil
}

// Name returns the instance name.
func (a *Adapter) Name() string { return a.cfg.Name }

// TargetSystem returns "crm".
func (a *Adapter) TargetSystem() string { return "crm" }

// firstAttemptRequests is what a first attempt takes from the portal's
// bucket: a list by ORIGIN_ID, the add and the list after it.
const firstAttemptRequests = 3

// Admit reserves a call's requests in the client-side bucket (nil without
// a limit): the worker waits for them before it takes an attempt.
func (a *Adapter) Admit(operation.Operation) *adapters.Admission {
	return a.client.Admit(firstAttemptRequests)
}

// Capabilities: lookup by ORIGIN_ID, no uniqueness (single-flight).
func (a *Adapter) Capabilities() adapters.Capabilities {
	return adapters.Capabilities{Lookup: true, SingleFlight: true, SettleTime: a.cfg.SettleTime, MaxKeyLen: a.cfg.MaxKeyLen}
}

// entity is what an operation type maps to.
type entity struct {
	name string // "deal", "activity"
	add  string
	list string
	// created is the creation-time field the marker scan filters on.
	created string
	// text is the text field that carries the key's marker.
	text   string
	fields map[string]any
	// compare lists the fields a found object must match.
	compare []string
}

// entityFor maps an operation type to its entity, without fields.
func entityFor(typ string) (entity, bool) {
	switch typ {
	case OpDealCreate:
		return entity{name: "deal", add: "crm.deal.add", list: "crm.deal.list", created: "DATE_CREATE", text: "COMMENTS"}, true
	case OpTaskCreate:
		return entity{name: "activity", add: "crm.activity.add", list: "crm.activity.list", created: "CREATED", text: "DESCRIPTION"}, true
	}
	return entity{}, false
}

func (a *Adapter) entityOf(op operation.Operation, key string) (entity, error) {
	bad := func(msg string) (entity, error) {
		return entity{}, adapters.Invalid(errors.New("bitrix24: " + msg))
	}
	ent, ok := entityFor(op.Type)
	if !ok {
		return bad(fmt.Sprintf("unsupported operation %q", op.Type))
	}
	title := op.String("title")
	if title == "" {
		return bad("title is required")
	}
	switch op.Type {
	case OpDealCreate:
		amount, currency := op.Int("amount_minor"), strings.ToUpper(op.String("currency"))
		switch {
		case op.String("customer_id") == "":
			return bad("customer_id is required")
		case amount < 0:
			return bad("amount_minor must not be negative")
		case currency == "":
			return bad("currency is required")
		}
		ent.fields = map[string]any{
			"TITLE": title, "OPPORTUNITY": adapters.FormatMinor(amount), "CURRENCY_ID": currency,
			"CONTACT_ID": op.String("customer_id"), "ORIGINATOR_ID": a.cfg.OriginatorID, "ORIGIN_ID": key,
			"COMMENTS": adapters.Marker(key),
		}
		ent.compare = []string{"TITLE", "OPPORTUNITY", "CURRENCY_ID"}
		if st := op.String("stage"); st != "" {
			ent.fields["STAGE_ID"] = st
			ent.compare = append(ent.compare, "STAGE_ID")
		}
		return ent, nil
	default: // OpTaskCreate
		resp := op.String("responsible_id")
		if resp == "" {
			return bad("responsible_id is required")
		}
		desc := adapters.Marker(key)
		if d := op.String("description"); d != "" {
			desc = d + "\n" + desc
		}
		ent.fields = map[string]any{
			"SUBJECT": title, "RESPONSIBLE_ID": resp, "TYPE_ID": strconv.Itoa(a.cfg.ActivityTypeID),
			"DESCRIPTION": desc, "COMPLETED": "N",
			"ORIGINATOR_ID": a.cfg.OriginatorID, "ORIGIN_ID": key,
		}
		if c := op.String("customer_id"); c != "" {
			ent.fields["OWNER_TYPE_ID"] = strconv.Itoa(a.cfg.OwnerTypeID)
			ent.fields["OWNER_ID"] = c
		}
		if d := op.Time("deadline"); !d.IsZero() {
			ent.fields["DEADLINE"] = d.UTC().Format(time.RFC3339)
			ent.fields["END_TIME"] = ent.fields["DEADLINE"]
		}
		ent.compare = []string{"SUBJECT", "RESPONSIBLE_ID"}
		return ent, nil
	}
}

func (a *Adapter) call(ctx context.Context, method string, body any) (*adapters.HTTPResponse, error) {
	u := a.cfg.PortalURL + "/rest/" + url.PathEscape(a.cfg.UserID) + "/" + url.PathEscape(a.code.Reveal()) + "/" + method + ".json"
	return a.client.JSON(ctx, http.MethodPost, u, body, nil)
}

func (a *Adapter) errorOf(method string, resp *adapters.HTTPResponse) *adapters.Error {
	be := parseError(resp.Body)
	e := adapters.StatusError(resp, a.cfg.Clock())
	if e == nil { // 2xx carrying an error body
		return adapters.Unexpected(adapters.ReconcileBeforeRetry, "bitrix24: %s: error %s with HTTP %d", method, safeCode(be.Error), resp.StatusCode)
	}
	switch {
	case be.Error == "QUERY_LIMIT_EXCEEDED" && resp.StatusCode == http.StatusServiceUnavailable:
		// The portal's bucket refused the request before running it.
		e = &adapters.Error{Code: adapters.CodeTargetRateLimit, Class: adapters.Retry, RetryAfter: e.RetryAfter}
		a.client.Refused()
	case be.Error == "OVERLOAD_LIMIT":
		e = adapters.NewError("overload_limit", adapters.NeverRetry, errors.New("bitrix24: portal blocked (OVERLOAD_LIMIT)"))
	case resp.StatusCode == http.StatusNotFound:
		e = adapters.NewError(adapters.CodeUnexpectedResponse, adapters.NeverRetry, errors.New("bitrix24: method or portal not found (HTTP 404)"))
	case resp.StatusCode == http.StatusConflict:
		e = adapters.NewError(adapters.CodeUnexpectedResponse, adapters.ReconcileBeforeRetry, errors.New("bitrix24: HTTP 409"))
	}
	if be.Error != "" {
		e.Err = fmt.Errorf("bitrix24: %s: %s (HTTP %d)", method, safeCode(be.Error), resp.StatusCode)
	}
	return e
}

// found is what a search by key found.
type found struct {
	// items hold the key, each once, oldest (lowest ID) first.
	items []listItem
	// byOrigin counts those found by ORIGIN_ID (the others carry only the
	// marker: a connector dropped the external-ID fields).
	byOrigin int
	// incomplete: the marker scan stopped at LookupMaxPages.
	incomplete bool
}

func (f found) ids() []string {
	ids := make([]string, 0, len(f.items))
	for _, it := range f.items {
		ids = append(ids, it.id)
	}
	return ids
}

// search finds the objects holding key: by =ORIGINATOR_ID/=ORIGIN_ID, and
// with scan also by the marker in the entity's text among the objects
// created since the key's first attempt (LookupSkew before it, per
// adapters.Attempt; else LookupWindow ago), LookupMaxPages pages at most.
func (a *Adapter) search(ctx context.Context, ent entity, key string, scan bool) (found, error) {
	sel := append([]string{"ID", "ORIGINATOR_ID", "ORIGIN_ID", ent.text}, ent.compare...)
	resp, err := a.call(ctx, ent.list, map[string]any{
		"filter": map[string]string{"=ORIGINATOR_ID": a.cfg.OriginatorID, "=ORIGIN_ID": key},
		"select": sel,
		"order":  map[string]string{"ID": "ASC"},
	})
	if err != nil {
		return found{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return found{}, a.errorOf(ent.list, resp)
	}
	items, err := parseList(resp.Body)
	if err != nil {
		return found{}, err
	}
	var f found
	seen := map[string]bool{}
	for _, it := range items {
		if it.str("ORIGIN_ID") == key && it.str("ORIGINATOR_ID") == a.cfg.OriginatorID && !seen[it.id] {
			seen[it.id] = true
			f.items = append(f.items, it)
		}
	}
	f.byOrigin = len(f.items)
	if scan {
		from := a.cfg.From(ctx, a.cfg.Clock())
		mark := adapters.Marker(key)
		next := 0
		for page := 0; ; page++ {
			if page == a.cfg.LookupMaxPages {
				f.incomplete = true
				break
			}
			resp, err := a.call(ctx, ent.list, map[string]any{
				"filter": map[string]string{">=" + ent.created: from.UTC().Format(time.RFC3339)},
				"select": sel,
				"order":  map[string]string{"ID": "ASC"},
				"start":  next,
			})
			if err != nil {
				return found{}, err
			}
			if resp.StatusCode != http.StatusOK {
				return found{}, a.errorOf(ent.list, resp)
			}
			items, n, err := parseListPage(resp.Body)
			if err != nil {
				return found{}, err
			}
			for _, it := range items {
				if strings.Contains(it.str(ent.text), mark) && !seen[it.id] {
					seen[it.id] = true
					f.items = append(f.items, it)
				}
			}
			if n <= next {
				break
			}
			next = n
		}
	}
	sort.SliceStable(f.items, func(i, j int) bool { return f.items[i].idNum < f.items[j].idNum })
	return f, nil
}

// keep is the outcome of an operation whose key f found: the oldest
// object, the others reported as duplicates.
func (f found) keep(ent entity, replayed bool) adapters.Outcome {
	out := outcome(ent.name, f.items[0].id, replayed)
	out.ReportDuplicates(f.ids()[1:])
	return out
}

// Execute creates the deal or activity once per key (single-flight): it
// searches first (the marker scan too unless the worker says this is the
// key's first attempt), returns what it finds, else adds and searches again
// to report duplicates.
func (a *Adapter) Execute(ctx context.Context, op operation.Operation) (adapters.Outcome, error) {
	key := adapters.TargetKey(op.Key.String(), a.cfg.MaxKeyLen)
	ent, err := a.entityOf(op, key)
	if err != nil {
		return adapters.Outcome{}, err
	}
	unlock, err := a.locks.Lock(ctx, key)
	if err != nil {
		return adapters.Outcome{}, adapters.NewError(adapters.CodeRequestNotSent, adapters.Retry, fmt.Errorf("bitrix24: wait for single-flight: %w", err))
	}
	defer unlock()
	retried := adapters.Retried(ctx)
	f, err := a.search(ctx, ent, key, retried)
	if err != nil {
		return adapters.Outcome{}, adapters.NotSent(err, "overload_limit")
	}
	if len(f.items) > 0 {
		for _, field := range ent.compare {
			if f.items[0].str(field) != fmt.Sprint(ent.fields[field]) && !sameNumber(f.items[0].str(field), fmt.Sprint(ent.fields[field])) {
				return adapters.Outcome{}, adapters.NewError(adapters.CodeKeyPayloadMismatch, adapters.NeverRetry,
					fmt.Errorf("bitrix24: the %s with this key holds another %s", ent.name, field))
			}
		}
		return f.keep(ent, true), nil
	}
	if f.incomplete {
		// The scan could not prove absence: creating now risks a duplicate.
		return adapters.Outcome{}, adapters.NewError(CodeLookupIncomplete, adapters.ReconcileBeforeRetry,
			errors.New("bitrix24: the search before create stopped at its page cap"))
	}
	resp, err := a.call(ctx, ent.add, map[string]any{"fields": ent.fields, "params": map[string]string{"REGISTER_SONET_EVENT": "N"}})
	if err != nil {
		return adapters.Outcome{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return adapters.Outcome{}, a.errorOf(ent.add, resp)
	}
	id, err := parseAddResult(resp.Body)
	if err != nil {
		return adapters.Outcome{}, err
	}
	out := outcome(ent.name, id, false)
	again, err := a.search(ctx, ent, key, retried)
	if err != nil {
		return out, nil // the object exists either way
	}
	if again.byOrigin == 0 {
		out.Details["key_stored"] = false
		a.cfg.Logger.Error("Bitrix24 stored the object without our ORIGIN_ID: only the text marker finds it",
			"operation_key", op.Key.String(), "target_system", "crm", "target_object_id", id)
	}
	if len(again.items) > 1 {
		out = again.keep(ent, again.items[0].id != id)
		if again.byOrigin == 0 {
			out.Details["key_stored"] = false
		}
	}
	return out, nil
}

// Lookup finds the object by ORIGIN_ID and by the marker scan; the oldest
// object is the operation's, the others are reported as duplicates.
func (a *Adapter) Lookup(ctx context.Context, op operation.Operation) (adapters.LookupResult, error) {
	key := adapters.TargetKey(op.Key.String(), a.cfg.MaxKeyLen)
	// A lookup goes by key alone: the reconciler may hold no payload.
	ent, ok := entityFor(op.Type)
	if !ok {
		return adapters.LookupResult{}, adapters.NewError(adapters.CodeValidation, adapters.NeverRetry,
			fmt.Errorf("bitrix24: unsupported operation %q", op.Type))
	}
	f, err := a.search(ctx, ent, key, true)
	if err != nil {
		e := adapters.AsError(err)
		if e.Class == adapters.NeverRetry && e.Code != adapters.CodeAuthorizationDenied {
			c := *e
			c.Class = adapters.ReconcileBeforeRetry
			return adapters.LookupResult{}, &c
		}
		return adapters.LookupResult{}, e
	}
	switch {
	case len(f.items) > 0:
		res := adapters.LookupResult{Status: adapters.Found, Outcome: f.keep(ent, true)}
		if len(f.items) > 1 {
			res.Code = adapters.CodeDuplicateObjects
		}
		return res, nil
	case f.incomplete:
		return adapters.LookupResult{Status: adapters.Indeterminate, Code: CodeLookupIncomplete}, nil
	}
	return adapters.LookupResult{Status: adapters.NotFound}, nil
}

// CodeLookupIncomplete: the marker scan read LookupMaxPages pages without
// finding the key, so absence is not proven.
const CodeLookupIncomplete = "lookup_incomplete"

func outcome(entity, id string, replayed bool) adapters.Outcome {
	status := "created"
	if entity == "activity" {
		status = "open"
	}
	return adapters.Outcome{ObjectID: id, BusinessStatus: status, Details: map[string]any{"entity": entity, operation.DetailTargetReplayed: replayed}}
}
