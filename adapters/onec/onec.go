package onec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/operation"
)

// OpInvoiceCreate is the operation type this adapter performs.
const OpInvoiceCreate = operation.TypeInvoiceCreate

// Adapter is the 1C adapter. It is safe for concurrent use.
type Adapter struct {
	cfg    Config
	client *adapters.Client
	locks  adapters.KeyLocks
}

var _ adapters.Adapter = (*Adapter)(nil)

// New validates cfg (after WithDefaults), resolves the password and returns
// the adapter.
func New(cfg Config) (*Adapter, error) {
	cfg, pw, err := adapters.ConfiguredSecret(cfg, adapters.Wrapping("onec: password: %w"))
	if err != nil {
		return nil, err
	}
	return &Adapter{cfg: cfg, client: cfg.NewClient(adapters.BasicAuth(cfg.User, pw))}, nil
}

// Name returns the instance name.
func (a *Adapter) Name() string { return a.cfg.Name }

// TargetSystem returns "1c".
func (a *Adapter) TargetSystem() string { return "1c" }

// Admit reserves a call's first requests in the client-side bucket (nil
// without a limit, the default): the search and the create over OData, the
// one POST to the HTTP service. The worker waits for them before it takes an
// attempt.
func (a *Adapter) Admit(op operation.Operation) *adapters.Admission {
	if a.cfg.Mode == ModeOData && op.Type != OpInvoiceCancel {
		return a.client.Admit(2)
	}
	return a.client.Admit(1)
}

// Capabilities: the HTTP service deduplicates by our key; plain OData does
// not (single-flight in the adapter, key in an extension attribute).
func (a *Adapter) Capabilities() adapters.Capabilities {
	if a.cfg.Mode == ModeOData {
		return adapters.Capabilities{Lookup: true, SingleFlight: true, MappingTable: true, MaxKeyLen: a.cfg.MaxKeyLen}
	}
	return adapters.Capabilities{NativeKey: true, Lookup: true, MaxKeyLen: a.cfg.MaxKeyLen}
}

func (a *Adapter) targetKey(op operation.Operation) string {
	return adapters.TargetKey(op.Key.String(), a.cfg.MaxKeyLen)
}

func withMarker(description, key string) string {
	if description == "" {
		return adapters.Marker(key)
	}
	return description + "\n" + adapters.Marker(key)
}

func bodyOf(op operation.Operation) (invoiceBody, error) {
	if op.Type != OpInvoiceCreate {
		return invoiceBody{}, adapters.Invalid(fmt.Errorf("onec: unsupported operation %q", op.Type))
	}
	b := invoiceBody{
		OrderID:     op.String("order_id"),
		CustomerID:  op.String("customer_id"),
		AmountMinor: op.Int("amount_minor"),
		Currency:    strings.ToUpper(op.String("currency")),
		Description: op.String("description"),
	}
	if t := op.Time("due_date"); !t.IsZero() {
		b.DueDate = t.UTC().Format("2006-01-02")
	} else {
		b.DueDate = op.String("due_date")
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"order_id", b.OrderID}, {"customer_id", b.CustomerID}, {"currency", b.Currency}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	switch {
	case len(missing) > 0:
		return b, adapters.Invalid(fmt.Errorf("onec: missing %s", strings.Join(missing, ", ")))
	case b.AmountMinor <= 0:
		return b, adapters.Invalid(errors.New("onec: amount_minor must be positive"))
	}
	return b, nil
}

// Execute creates the invoice once, or cancels one once (cancel.go).
func (a *Adapter) Execute(ctx context.Context, op operation.Operation) (adapters.Outcome, error) {
	if op.Type == OpInvoiceCancel {
		return a.executeCancel(ctx, op)
	}
	b, err := bodyOf(op)
	if err != nil {
		return adapters.Outcome{}, err
	}
	if a.cfg.Mode == ModeOData {
		return a.executeOData(ctx, op, b)
	}
	return a.executeService(ctx, op, b)
}

// Lookup finds the invoice created, or the cancelling document made, for
// op's key.
func (a *Adapter) Lookup(ctx context.Context, op operation.Operation) (adapters.LookupResult, error) {
	if op.Type == OpInvoiceCancel {
		return a.lookupCancel(ctx, op)
	}
	if a.cfg.Mode == ModeOData {
		found, err := a.searchOData(ctx, a.targetKey(op), true)
		if err != nil {
			return adapters.LookupResult{}, err
		}
		if len(found) == 0 {
			return adapters.LookupResult{Status: adapters.NotFound}, nil
		}
		res := adapters.LookupResult{Status: adapters.Found, Outcome: keepOldest(found, true)}
		if len(found) > 1 {
			res.Code = adapters.CodeDuplicateObjects
		}
		return res, nil
	}
	return a.lookupService(ctx, op)
}

// --- HTTP service ---

func (a *Adapter) serviceURL(parts ...string) string {
	u := a.cfg.BaseURL + a.cfg.ServicePath + "/invoices"
	for _, p := range parts {
		u += "/" + url.PathEscape(p)
	}
	return u
}

func (a *Adapter) executeService(ctx context.Context, op operation.Operation, b invoiceBody) (adapters.Outcome, error) {
	key := a.targetKey(op)
	b.Description = withMarker(b.Description, key)
	resp, err := a.client.JSON(ctx, http.MethodPost, a.serviceURL(), b, http.Header{"Idempotency-Key": {key}})
	if err != nil {
		return adapters.Outcome{}, err
	}
	switch resp.StatusCode {
	case http.StatusCreated, http.StatusOK:
		ans, err := parseInvoiceAnswer(resp.Body, adapters.ReconcileBeforeRetry)
		if err != nil {
			return adapters.Outcome{}, err
		}
		out := serviceOutcome(ans)
		if ans.Key != key {
			// The service did not store our key (a connector dropped the
			// header, or an old service): a replay would not be recognised.
			out.Details["key_stored"] = false
			a.cfg.Logger.Error("1C stored the invoice without our key: replays are not deduplicated",
				"operation_key", op.Key.String(), "target_system", "1c", "target_object_id", ans.Ref)
		}
		return out, nil
	}
	return adapters.Outcome{}, a.serviceError(resp)
}

func (a *Adapter) serviceError(resp *adapters.HTTPResponse) *adapters.Error {
	se := parseServiceError(resp.Body)
	now := a.cfg.Clock()
	switch {
	case resp.StatusCode == http.StatusConflict && se.Error == "idempotency_key_reused":
		return adapters.NewError(adapters.CodeKeyPayloadMismatch, adapters.NeverRetry, errors.New("onec: key reused with another payload (HTTP 409)"))
	case resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests:
		e := adapters.StatusError(resp, now)
		e.RetryAfter = retryAfterOf(resp, se, now)
		return e
	}
	return adapters.StatusError(resp, now)
}

func (a *Adapter) lookupService(ctx context.Context, op operation.Operation) (adapters.LookupResult, error) {
	key := a.targetKey(op)
	resp, err := a.client.JSON(ctx, http.MethodGet, a.serviceURL(key), nil, nil)
	if err != nil {
		return adapters.LookupResult{}, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		ans, err := parseInvoiceAnswer(resp.Body, adapters.ReconcileBeforeRetry)
		if err != nil {
			return adapters.LookupResult{}, err
		}
		if ans.Key != key && !(ans.Key == "" && ans.FoundBy == "marker") {
			return adapters.LookupResult{}, adapters.Unexpected(adapters.ReconcileBeforeRetry, "onec: lookup answered for another key")
		}
		return adapters.LookupResult{Status: adapters.Found, Outcome: serviceOutcome(ans)}, nil
	case http.StatusNotFound:
		// Only the service's own "not_found" is a verdict; a 404 from the
		// web server (service not published) is not.
		if parseServiceError(resp.Body).Error == "not_found" {
			return adapters.LookupResult{Status: adapters.NotFound}, nil
		}
		return adapters.LookupResult{}, adapters.Unexpected(adapters.ReconcileBeforeRetry, "onec: lookup HTTP 404 without the service's not_found")
	}
	e := a.serviceError(resp)
	if e.Class == adapters.NeverRetry && e.Code != adapters.CodeAuthorizationDenied {
		e.Class = adapters.ReconcileBeforeRetry
	}
	return adapters.LookupResult{}, e
}

func serviceOutcome(ans invoiceAnswer) adapters.Outcome {
	status := "created"
	if ans.Posted {
		status = "posted"
	}
	return adapters.Outcome{
		ObjectID:       ans.Ref,
		BusinessStatus: status,
		Details:        map[string]any{"number": safeText(ans.Number, 32), "posted": ans.Posted, operation.DetailTargetReplayed: ans.Replayed},
	}
}

// --- OData ---

func (a *Adapter) odataURL(query url.Values) string {
	u := a.cfg.BaseURL + a.cfg.ODataPath + "/" + url.PathEscape(a.cfg.Document)
	if query != nil {
		u += "?" + strings.ReplaceAll(query.Encode(), "+", "%20")
	}
	return u
}

// searchOData finds the documents holding key: by the key attribute, and
// with marker also by the comment marker (substringof), each once, oldest
// first.
func (a *Adapter) searchOData(ctx context.Context, key string, marker bool) ([]odataEntity, error) {
	attr := a.cfg.KeyAttribute + " eq '" + quote(key) + "' and DeletionMark eq false"
	found, err := a.queryOData(ctx, attr, key, func(e odataEntity) bool { return e.Key == key })
	if err != nil || !marker {
		return found, err
	}
	mark := adapters.Marker(key)
	byMark, err := a.queryOData(ctx, "substringof('"+quote(mark)+"', Комментарий) and DeletionMark eq false", key,
		func(e odataEntity) bool { return strings.Contains(e.Comment, mark) })
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	out := make([]odataEntity, 0, len(found)+len(byMark))
	for _, e := range append(found, byMark...) {
		if !seen[e.Ref] {
			seen[e.Ref] = true
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Date != out[j].Date {
			return out[i].Date < out[j].Date
		}
		return out[i].Number < out[j].Number
	})
	return out, nil
}

func quote(s string) string { return strings.ReplaceAll(s, "'", "''") }

// queryOData lists the documents matching filter and keeps those holding
// the key (holds checks it: the filter is the server's, the verdict ours).
func (a *Adapter) queryOData(ctx context.Context, filter, key string, holds func(odataEntity) bool) ([]odataEntity, error) {
	q := url.Values{}
	q.Set("$format", "json")
	q.Set("$filter", filter)
	q.Set("$select", strings.Join([]string{"Ref_Key", "Number", "Date", "Posted", "DeletionMark", a.cfg.KeyAttribute, "НомерЗаказа", "СуммаДокумента", "ВалютаДокумента", "Комментарий"}, ","))
	resp, err := a.client.JSON(ctx, http.MethodGet, a.odataURL(q), nil, nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		e := a.odataError(resp)
		if e.Class == adapters.NeverRetry && e.Code != adapters.CodeAuthorizationDenied {
			e.Class = adapters.ReconcileBeforeRetry
		}
		return nil, e
	}
	found, err := parseODataList(resp.Body, a.cfg.KeyAttribute, adapters.ReconcileBeforeRetry)
	if err != nil {
		return nil, err
	}
	out := found[:0]
	for _, e := range found {
		if holds(e) && !e.Deleted {
			out = append(out, e)
		}
	}
	return out, nil
}

func (a *Adapter) odataError(resp *adapters.HTTPResponse) *adapters.Error {
	e := adapters.StatusError(resp, a.cfg.Clock())
	if resp.StatusCode == http.StatusBadGateway && !resp.EarlyAnswer {
		e.Class = adapters.ReconcileBeforeRetry
	}
	if c := odataErrorCode(resp.Body); c == "13" {
		e = adapters.Invalid(errors.New("onec: OData error 13"))
	}
	return e
}

func (a *Adapter) executeOData(ctx context.Context, op operation.Operation, b invoiceBody) (adapters.Outcome, error) {
	key := a.targetKey(op)
	unlock, err := a.locks.Lock(ctx, key)
	if err != nil {
		return adapters.Outcome{}, adapters.NewError(adapters.CodeRequestNotSent, adapters.Retry, fmt.Errorf("onec: wait for single-flight: %w", err))
	}
	defer unlock()

	retried := adapters.Retried(ctx)
	found, err := a.searchOData(ctx, key, retried)
	if err != nil {
		return adapters.Outcome{}, adapters.NotSent(err)
	}
	if len(found) > 0 {
		if !sameInvoice(found[0], b) {
			return adapters.Outcome{}, adapters.NewError(adapters.CodeKeyPayloadMismatch, adapters.NeverRetry, errors.New("onec: a document with this key holds another payload"))
		}
		return keepOldest(found, true), nil
	}

	doc := map[string]any{
		"Date":             a.cfg.Clock().UTC().Format("2006-01-02T15:04:05"),
		a.cfg.KeyAttribute: key,
		"НомерЗаказа":      b.OrderID,
		"КодКонтрагента":   b.CustomerID,
		"СуммаДокумента":   json.Number(adapters.FormatMinor(b.AmountMinor)),
		"ВалютаДокумента":  b.Currency,
		"СрокОплаты":       b.DueDate,
		"Комментарий":      withMarker(b.Description, key),
	}
	q := url.Values{}
	q.Set("$format", "json")
	resp, err := a.client.JSON(ctx, http.MethodPost, a.odataURL(q), doc, nil)
	if err != nil {
		return adapters.Outcome{}, err
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return adapters.Outcome{}, a.odataError(resp)
	}
	ent, err := parseODataEntity(resp.Body, a.cfg.KeyAttribute, adapters.ReconcileBeforeRetry)
	if err != nil {
		return adapters.Outcome{}, err
	}
	out := odataOutcome(ent, false)
	// Re-search: more than one document for the key means a race outside
	// this process (another replica without the journal's lease) or a
	// connector that dropped the attribute.
	again, err := a.searchOData(ctx, key, retried)
	if err != nil {
		return out, nil // the document exists either way
	}
	stored := false
	for _, e := range again {
		stored = stored || e.Key == key
	}
	if len(again) > 1 {
		out = keepOldest(again, again[0].Ref != ent.Ref)
	}
	if !stored {
		out.Details["key_stored"] = false
		a.cfg.Logger.Error("1C stored the document without our key attribute: only the comment marker finds it",
			"operation_key", op.Key.String(), "target_system", "1c", "target_object_id", ent.Ref)
	}
	return out, nil
}

func sameInvoice(e odataEntity, b invoiceBody) bool {
	m, ok := minorOf(e.Amount)
	return ok && m == b.AmountMinor && e.OrderID == b.OrderID && strings.EqualFold(e.Currency, b.Currency)
}

func odataOutcome(e odataEntity, replayed bool) adapters.Outcome {
	status := "created"
	if e.Posted {
		status = "posted"
	}
	d := map[string]any{"number": safeText(e.Number, 32), "posted": e.Posted, operation.DetailTargetReplayed: replayed}
	return adapters.Outcome{ObjectID: e.Ref, BusinessStatus: status, Details: d}
}

// keepOldest is the outcome of an operation whose key found documents
// (oldest first): the oldest, the others reported as duplicates.
func keepOldest(found []odataEntity, replayed bool) adapters.Outcome {
	out := odataOutcome(found[0], replayed)
	ids := make([]string, 0, len(found)-1)
	for _, e := range found[1:] {
		ids = append(ids, e.Ref)
	}
	out.ReportDuplicates(ids)
	return out
}

func safeText(s string, n int) string {
	if !plainID(s) {
		return ""
	}
	if len(s) > n {
		return s[:n]
	}
	return s
}
