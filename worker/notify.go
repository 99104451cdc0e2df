package worker

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemgate/idemgate/consumer"
	"github.com/idemgate/idemgate/internal/startstop"
	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/redact"
)

// ApprovalNotification is the body of the signed POST that announces an
// intent waiting for a person (approvals.notify): what a chat bridge needs
// to show the request and link to where it is decided. Only the
// significant fields, masked as every face masks them; never a payload's
// free text or a secret.
type ApprovalNotification struct {
	// Type is "approval.requested".
	Type         string `json:"type"`
	OperationKey string `json:"operation_key"`
	Operation    string `json:"operation"`
	TargetSystem string `json:"target_system"`
	// Request is what the approver is shown: the significant fields, masked.
	Request     json.RawMessage `json:"request"`
	Approvers   int             `json:"approvers"`
	RequestedBy string          `json:"requested_by,omitempty"`
	RequestedAt time.Time       `json:"requested_at"`
	ExpiresAt   time.Time       `json:"expires_at"`
	// URL is the approval page ("" when none is served).
	URL string `json:"url,omitempty"`
}

// Headers of a notification POST.
const (
	// HeaderSignature is "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// "<t>.<body>" under the shared secret>".
	HeaderSignature = "Idemgate-Signature"
	// HeaderDelivery identifies the notification: the same on every retry
	// of it, so that a receiver drops repeats (delivery is at least once).
	HeaderDelivery = "Idemgate-Delivery"
)

// SignNotification is the Idemgate-Signature value of body sent at t.
func SignNotification(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// notificationID is a request's message id and delivery id: its key and
// when it was requested (a request made again after an earlier one ended is
// announced again).
func notificationID(a journal.Approval) string {
	return "approval-requested:" + a.Key + ":" + strconv.FormatInt(a.RequestedAt.UnixNano(), 10)
}

// announce publishes the notification of a waiting intent (once per
// request: copies are dropped by the stream's duplicate window).
func (w *Worker) announce(ctx context.Context, a journal.Approval, url string) error {
	body, err := json.Marshal(ApprovalNotification{
		Type: "approval.requested", OperationKey: a.Key, Operation: a.OperationType, TargetSystem: a.TargetSystem,
		Request: a.Display, Approvers: a.Approvers, RequestedBy: a.RequestedBy,
		RequestedAt: a.RequestedAt.UTC(), ExpiresAt: a.ExpiresAt.UTC(), URL: url,
	})
	if err != nil {
		return err
	}
	_, err = consumer.PublishNotification(ctx, w.d.JS, notificationID(a), body)
	return err
}

// NotifierConfig is approvals.notify.
type NotifierConfig struct {
	// URL receives the POSTs.
	URL string
	// Secret signs them (HMAC-SHA256).
	Secret redact.Secret
	// Timeout bounds one POST. Default 10s.
	Timeout time.Duration
	// MaxAttempts bounds the deliveries of one notification. Default 10.
	MaxAttempts int
}

// WithDefaults fills the zero values.
func (c NotifierConfig) WithDefaults() NotifierConfig {
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 10
	}
	return c
}

// Notifier delivers the approval notifications of the notify stream as
// signed POSTs: acked on a 2xx, retried later (1s, 2s, 4s … up to 5
// minutes) on anything else, given up after MaxAttempts with an error log
// and the metric idemgate_approval_notifications_total{outcome="given_up"}.
// Every replica may run one; the durable consumer shares the work.
type Notifier struct {
	cfg    NotifierConfig
	feed   *consumer.NotifyFeed
	client *http.Client
	log    *slog.Logger
	sent   *prometheus.CounterVec
	now    func() time.Time
	startstop.BaseStartStop
}

// Notification outcomes (idemgate_approval_notifications_total{outcome}).
const (
	notifyDelivered = "delivered"
	notifyRetried   = "retried"
	notifyGivenUp   = "given_up"
)

// NewNotifier builds a notifier on the notify stream's consumer
// (consumer.EnsureNotify).
func NewNotifier(cfg NotifierConfig, feed *consumer.NotifyFeed, log *slog.Logger, m *Metrics) *Notifier {
	cfg = cfg.WithDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	return &Notifier{cfg: cfg, feed: feed, client: &http.Client{Timeout: cfg.Timeout}, log: log, sent: m.notifications, now: time.Now}
}

// Start delivers notifications until Stop.
func (n *Notifier) Start(ctx context.Context) error {
	ctx, shouldStart, started, stopped := n.StartInit(ctx)
	if !shouldStart {
		return fmt.Errorf("approval notifier: %w", startstop.ErrAlreadyStarted)
	}
	go func() {
		started()
		defer stopped()
		for ctx.Err() == nil {
			notices, err := n.feed.Next(8, time.Second)
			if err != nil {
				if ctx.Err() == nil {
					n.log.Warn("approval notifications not fetched", "error", err.Error())
					sleepCtx(ctx, time.Second)
				}
				continue
			}
			for _, m := range notices {
				n.deliver(ctx, m)
			}
		}
	}()
	return nil
}

// Stop stops delivering; safe twice.
func (n *Notifier) Stop() { n.BaseStartStop.Stop() }

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// deliver POSTs one notification and settles its message.
func (n *Notifier) deliver(ctx context.Context, m consumer.Notice) {
	attempt, id := m.Attempt(), m.ID()
	err := n.post(ctx, id, m.Data())
	switch {
	case err == nil:
		n.sent.WithLabelValues(notifyDelivered).Inc()
		_ = m.Done()
	case attempt >= n.cfg.MaxAttempts:
		n.sent.WithLabelValues(notifyGivenUp).Inc()
		n.log.Error("approval notification given up: the request still waits; the console's Approvals page lists it",
			"delivery", id, "attempts", attempt, "error", err.Error())
		_ = m.GiveUp()
	default:
		n.sent.WithLabelValues(notifyRetried).Inc()
		delay := min(time.Second<<min(attempt-1, 9), 5*time.Minute)
		n.log.Warn("approval notification not delivered; retried later", "delivery", id, "attempt", attempt, "in", delay.String(), "error", err.Error())
		_ = m.Retry(delay)
	}
}

// post sends one signed POST; an error for anything but a 2xx answer.
func (n *Notifier) post(ctx context.Context, id string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "idemgate-approvals")
	req.Header.Set(HeaderDelivery, id)
	req.Header.Set(HeaderSignature, SignNotification([]byte(n.cfg.Secret.Reveal()), n.now(), body))
	resp, err := n.client.Do(req)
	if err != nil {
		return fmt.Errorf("POST: %w", redactURLError(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST answered %d", resp.StatusCode)
	}
	return nil
}

// redactURLError keeps a transport error's cause without the URL, which
// may carry a token of the receiver's in its query.
func redactURLError(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}
