package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/idemgate/idemgate/operation"
	"github.com/idemgate/idemgate/redact"
)

// ObjectRef names the object a notification is about.
type ObjectRef struct {
	// Source is the configured source name.
	Source string
	// EventType is the notification's event type ("payment.succeeded").
	EventType string
	// ID is the provider's object id (the notification's "object.id").
	ID string
}

// Refetcher fetches the provider's current copy of the object a notification
// names, for sources whose notifications carry no signature. Only that copy
// is trusted: the server checks that its "id" and "status" (and "amount",
// when both have one) equal the notification's "object", then maps the route
// payload from a body whose "object" is the fetched copy.
//
// Refetch returns ErrObjectNotFound when the provider does not know the
// object (the notification is not trusted: 401); any other error is taken as
// transient (503, so the sender retries).
type Refetcher interface {
	Refetch(ctx context.Context, ref ObjectRef) (json.RawMessage, error)
}

// ErrObjectNotFound reports that the provider has no such object.
var ErrObjectNotFound = errors.New("object not found at the provider")

// ErrRefetchRejected reports that the provider refused our credentials or
// request (a configuration problem, not the sender's).
var ErrRefetchRejected = errors.New("provider refused the re-fetch")

// maxObjectBytes bounds a fetched object.
const maxObjectBytes = 1 << 20

// YooKassaRefetcher fetches YooKassa objects: GET {API}/payments/{id} for
// payment.* events, /refunds/{id} for refund.*, /payouts/{id} for payout.*
// and /deals/{id} for deal.*, with HTTP Basic auth shopId:secretKey.
type YooKassaRefetcher struct {
	api     string
	shopID  string
	secret  redact.Secret
	timeout time.Duration
	client  *http.Client
}

// NewYooKassaRefetcher returns a refetcher for cfg (after WithDefaults, with
// its secret key resolved). client nil means a client with no overall
// timeout; cfg.Timeout bounds each fetch either way.
func NewYooKassaRefetcher(cfg YooKassaConfig, client *http.Client) (*YooKassaRefetcher, error) {
	if cfg.ShopID == "" || cfg.SecretKey.IsZero() {
		return nil, fmt.Errorf("%w: yookassa refetch needs shop_id and secret_key", ErrInvalidConfig)
	}
	u, err := url.Parse(cfg.API)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("%w: yookassa refetch api must be an http(s) URL", ErrInvalidConfig)
	}
	if client == nil {
		client = &http.Client{}
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultRefetchTimeout
	}
	return &YooKassaRefetcher{
		api: strings.TrimSuffix(cfg.API, "/"), shopID: cfg.ShopID, secret: cfg.SecretKey,
		timeout: timeout, client: client,
	}, nil
}

var yookassaCollections = map[string]string{
	"payment": "payments", "refund": "refunds", "payout": "payouts", "deal": "deals",
}

// Refetch implements Refetcher.
func (y *YooKassaRefetcher) Refetch(ctx context.Context, ref ObjectRef) (json.RawMessage, error) {
	kind, _, _ := strings.Cut(ref.EventType, ".")
	coll, ok := yookassaCollections[kind]
	if !ok {
		return nil, fmt.Errorf("yookassa refetch: no object kind for this event type")
	}
	if !operation.ValidToken(ref.ID, 64) {
		// Not an id YooKassa issues (1-64 of [A-Za-z0-9_-]); nothing to fetch.
		return nil, fmt.Errorf("yookassa refetch: %w (ill-formed id)", ErrObjectNotFound)
	}
	ctx, cancel := context.WithTimeout(ctx, y.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, y.api+"/"+coll+"/"+url.PathEscape(ref.ID), nil)
	if err != nil {
		return nil, fmt.Errorf("yookassa refetch: %w", err)
	}
	req.SetBasicAuth(y.shopID, string(y.secret))
	req.Header.Set("Accept", "application/json")
	resp, err := y.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("yookassa refetch %s: %w", coll, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxObjectBytes+1))
	if err != nil {
		return nil, fmt.Errorf("yookassa refetch %s: read: %w", coll, err)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("yookassa refetch %s: %w", coll, ErrObjectNotFound)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("yookassa refetch %s: HTTP %d: %w", coll, resp.StatusCode, ErrRefetchRejected)
	default:
		return nil, fmt.Errorf("yookassa refetch %s: HTTP %d", coll, resp.StatusCode)
	}
	if len(body) > maxObjectBytes {
		return nil, fmt.Errorf("yookassa refetch %s: object larger than %d bytes", coll, maxObjectBytes)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("yookassa refetch %s: answer is not a JSON object", coll)
	}
	return body, nil
}
