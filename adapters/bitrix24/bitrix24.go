package bitrix24

import (
	"context"
	"encoding/json"
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
	OpDealCreate = "crm.deal.create"
	OpTaskCreate = "crm.task.create"
)

// Adapter is the Bitrix24 adapter. It is safe for concurrent use.
type Adapter struct {
	cfg    Config
	code   redact.Secret
	client *http.Client
	locks  adapters.KeyLocks
}

var _ adapters.Adapter = (*Adapter)(nil)

// New validates cfg (after WithDefaults), resolves the webhook code and
// returns the adapter.
func New(cfg Config) (*Adapter, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	code, err := adapters.LoadCredential(cfg.WebhookCode, cfg.WebhookCodeEnv, cfg.WebhookCodeFile, cfg.Getenv)
	if err != nil {
		return nil, fmt.Errorf("bitrix24: webhook code: %w", err)
	}
	if strings.ContainsAny(code.Reveal(), "/?#% ") {
		return nil, fmt.Errorf("%w: webhook code must be a plain token", ErrInvalidConfig)
	}
	return &Adapter{cfg: cfg, code: code, client: adapters.NewHTTPClient(cfg.Timeout)}, nil
}

// Name returns the instance name.
func (a *Adapter) Name() string { return a.cfg.Name }

// TargetSystem returns "crm".
func (a *Adapter) TargetSystem() string { return "crm" }

// Capabilities: lookup by ORIGIN_ID, no uniqueness (single-flight).
func (a *Adapter) Capabilities() adapters.Capabilities {
	return adapters.Capabilities{Lookup: true, SingleFlight: true, SettleTime: a.cfg.SettleTime, MaxKeyLen: a.cfg.MaxKeyLen}
}

// entity is what an operation type maps to.
type entity struct {
	name   string // "deal", "activity"
	add    string
	list   string
	fields map[string]any
	// compare lists the fields a found object must match.
	compare []string
}

func (a *Adapter) entityOf(op operation.Operation, key string) (entity, error) {
	bad := func(msg string) (entity, error) {
		return entity{}, adapters.NewError(adapters.CodeValidation, adapters.NeverRetry, errors.New("bitrix24: "+msg))
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
		f := map[string]any{
			"TITLE": title, "OPPORTUNITY": formatMinor(amount), "CURRENCY_ID": currency,
			"CONTACT_ID": op.String("customer_id"), "ORIGINATOR_ID": a.cfg.OriginatorID, "ORIGIN_ID": key,
		}
		cmp := []string{"TITLE", "OPPORTUNITY", "CURRENCY_ID"}
		if st := op.String("stage"); st != "" {
			f["STAGE_ID"] = st
			cmp = append(cmp, "STAGE_ID")
		}
		return entity{name: "deal", add: "crm.deal.add", list: "crm.deal.list", fields: f, compare: cmp}, nil
	case OpTaskCreate:
		resp := op.String("responsible_id")
		if resp == "" {
			return bad("responsible_id is required")
		}
		f := map[string]any{
			"SUBJECT": title, "RESPONSIBLE_ID": resp, "TYPE_ID": strconv.Itoa(a.cfg.ActivityTypeID),
			"DESCRIPTION": op.String("description"), "COMPLETED": "N",
			"ORIGINATOR_ID": a.cfg.OriginatorID, "ORIGIN_ID": key,
		}
		if c := op.String("customer_id"); c != "" {
			f["OWNER_TYPE_ID"] = strconv.Itoa(a.cfg.OwnerTypeID)
			f["OWNER_ID"] = c
		}
		if d := op.Time("deadline"); !d.IsZero() {
			f["DEADLINE"] = d.UTC().Format(time.RFC3339)
			f["END_TIME"] = f["DEADLINE"]
		}
		return entity{name: "activity", add: "crm.activity.add", list: "crm.activity.list", fields: f, compare: []string{"SUBJECT", "RESPONSIBLE_ID"}}, nil
	}
	return bad(fmt.Sprintf("unsupported operation %q", op.Type))
}

func (a *Adapter) call(ctx context.Context, method string, body any) (*adapters.HTTPResponse, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, adapters.NewError(adapters.CodeValidation, adapters.NeverRetry, fmt.Errorf("bitrix24: encode %s: %w", method, err))
	}
	u := a.cfg.PortalURL + "/rest/" + url.PathEscape(a.cfg.UserID) + "/" + url.PathEscape(a.code.Reveal()) + "/" + method + ".json"
	req, err := adapters.NewRequest(ctx, http.MethodPost, u, b)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	return adapters.Send(a.client, req, 0)
}

func (a *Adapter) errorOf(method string, resp *adapters.HTTPResponse) *adapters.Error {
	be := parseError(resp.Body)
	e := adapters.StatusError(resp, a.cfg.Clock())
	if e == nil { // 2xx carrying an error body
		return adapters.Unexpected(adapters.ReconcileBeforeRetry, "bitrix24: %s: error %s with HTTP %d", method, safeCode(be.Error), resp.StatusCode)
	}
	switch {
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

// search lists objects with our ORIGINATOR_ID and ORIGIN_ID, oldest first.
func (a *Adapter) search(ctx context.Context, ent entity, key string) ([]listItem, error) {
	sel := append([]string{"ID", "ORIGINATOR_ID", "ORIGIN_ID"}, ent.compare...)
	resp, err := a.call(ctx, ent.list, map[string]any{
		"filter": map[string]string{"=ORIGINATOR_ID": a.cfg.OriginatorID, "=ORIGIN_ID": key},
		"select": sel,
		"order":  map[string]string{"ID": "ASC"},
	})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, a.errorOf(ent.list, resp)
	}
	items, err := parseList(resp.Body)
	if err != nil {
		return nil, err
	}
	out := items[:0]
	for _, it := range items {
		if it.str("ORIGIN_ID") == key && it.str("ORIGINATOR_ID") == a.cfg.OriginatorID {
			out = append(out, it)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].idNum < out[j].idNum })
	return out, nil
}

// Execute creates the deal or activity once per key (single-flight).
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

	found, err := a.search(ctx, ent, key)
	if err != nil {
		return adapters.Outcome{}, notSent(err)
	}
	if len(found) > 0 {
		a.warnDuplicates(op, len(found))
		for _, f := range ent.compare {
			if found[0].str(f) != fmt.Sprint(ent.fields[f]) && !sameNumber(found[0].str(f), fmt.Sprint(ent.fields[f])) {
				return adapters.Outcome{}, adapters.NewError(adapters.CodeKeyPayloadMismatch, adapters.NeverRetry,
					fmt.Errorf("bitrix24: the %s with this key holds another %s", ent.name, f))
			}
		}
		return outcome(ent.name, found[0].id, true, len(found)), nil
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
	out := outcome(ent.name, id, false, 1)
	if again, err := a.search(ctx, ent, key); err == nil {
		switch {
		case len(again) > 1:
			a.warnDuplicates(op, len(again))
			out.Details["duplicates"] = len(again)
		case len(again) == 0:
			out.Details["key_stored"] = false
			a.cfg.Logger.Error("Bitrix24 stored the object without our ORIGIN_ID: replays are not deduplicated",
				"operation_key", op.Key.String(), "target_system", "crm", "target_object_id", id)
		}
	}
	return out, nil
}

// Lookup lists by ORIGIN_ID; the oldest object wins.
func (a *Adapter) Lookup(ctx context.Context, op operation.Operation) (adapters.LookupResult, error) {
	key := adapters.TargetKey(op.Key.String(), a.cfg.MaxKeyLen)
	// A lookup goes by key alone: the reconciler may hold no payload.
	var ent entity
	switch op.Type {
	case OpDealCreate:
		ent = entity{name: "deal", list: "crm.deal.list"}
	case OpTaskCreate:
		ent = entity{name: "activity", list: "crm.activity.list"}
	default:
		return adapters.LookupResult{}, adapters.NewError(adapters.CodeValidation, adapters.NeverRetry,
			fmt.Errorf("bitrix24: unsupported operation %q", op.Type))
	}
	found, err := a.search(ctx, ent, key)
	if err != nil {
		e := adapters.AsError(err)
		if e.Class == adapters.NeverRetry && e.Code != adapters.CodeAuthorizationDenied {
			c := *e
			c.Class = adapters.ReconcileBeforeRetry
			return adapters.LookupResult{}, &c
		}
		return adapters.LookupResult{}, e
	}
	if len(found) == 0 {
		return adapters.LookupResult{Status: adapters.NotFound}, nil
	}
	a.warnDuplicates(op, len(found))
	return adapters.LookupResult{Status: adapters.Found, Outcome: outcome(ent.name, found[0].id, true, len(found))}, nil
}

func (a *Adapter) warnDuplicates(op operation.Operation, n int) {
	if n > 1 {
		a.cfg.Logger.Error("Bitrix24 holds several objects for one operation key; the oldest is used, the rest need an operator",
			"operation_key", op.Key.String(), "target_system", "crm", "objects", n, "error_code", adapters.CodeDuplicateObjects)
	}
}

// notSent: a failed search before the add sent no add.
func notSent(err error) error {
	e := adapters.AsError(err)
	if e.Code == adapters.CodeAuthorizationDenied || e.Code == "overload_limit" {
		return e
	}
	c := *e
	c.Class = adapters.Retry
	return &c
}

func outcome(entity, id string, replayed bool, n int) adapters.Outcome {
	status := "created"
	if entity == "activity" {
		status = "open"
	}
	d := map[string]any{"entity": entity, "replayed": replayed}
	if n > 1 {
		d["duplicates"] = n
	}
	return adapters.Outcome{ObjectID: id, BusinessStatus: status, Details: d}
}
