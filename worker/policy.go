package worker

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/idemgate/idemgate/adapters"
)

// RetryPolicy is the article's retry block: bounded attempts, exponential
// delay with jitter. It comes from configuration, not code.
type RetryPolicy struct {
	// MaxAttempts bounds calls to the target for one operation across every
	// delivery and replica (the journal's attempt count). Default 4.
	MaxAttempts int `mapstructure:"max_attempts"`
	// InitialDelay is the first retry's delay. Default 500ms.
	InitialDelay time.Duration `mapstructure:"initial_delay"`
	// Multiplier grows the delay per attempt. Default 2.
	Multiplier float64 `mapstructure:"multiplier"`
	// MaxDelay caps one delay. Default 5s.
	MaxDelay time.Duration `mapstructure:"max_delay"`
	// Jitter spreads delays randomly by ±50 %. Default true.
	Jitter *bool `mapstructure:"jitter"`
	// MaxElapsed bounds the retries one worker runs inside its lease before it
	// releases the claim and lets JetStream redeliver later. Default 10s.
	MaxElapsed time.Duration `mapstructure:"max_elapsed"`
}

// WithDefaults fills zero fields.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 4
	}
	if p.InitialDelay == 0 {
		p.InitialDelay = 500 * time.Millisecond
	}
	if p.Multiplier == 0 {
		p.Multiplier = 2
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = 5 * time.Second
	}
	if p.Jitter == nil {
		t := true
		p.Jitter = &t
	}
	if p.MaxElapsed == 0 {
		p.MaxElapsed = 10 * time.Second
	}
	return p
}

// Validate checks the policy.
func (p RetryPolicy) Validate() error {
	var errs []error
	if p.MaxAttempts < 1 || p.MaxAttempts > 100 {
		errs = append(errs, fmt.Errorf("retry.max_attempts %d: between 1 and 100", p.MaxAttempts))
	}
	if p.InitialDelay <= 0 {
		errs = append(errs, fmt.Errorf("retry.initial_delay %v: must be positive", p.InitialDelay))
	}
	if p.Multiplier < 1 {
		errs = append(errs, fmt.Errorf("retry.multiplier %v: at least 1", p.Multiplier))
	}
	if p.MaxDelay < p.InitialDelay {
		errs = append(errs, fmt.Errorf("retry.max_delay %v: at least initial_delay %v", p.MaxDelay, p.InitialDelay))
	}
	if p.MaxElapsed <= 0 {
		errs = append(errs, fmt.Errorf("retry.max_elapsed %v: must be positive", p.MaxElapsed))
	}
	return errors.Join(errs...)
}

// Delay returns the delay before attempt n+1 after n attempts (n ≥ 1),
// at least retryAfter when the target asked for it.
func (p RetryPolicy) Delay(n int, retryAfter time.Duration) time.Duration {
	d := float64(p.InitialDelay)
	for i := 1; i < n; i++ {
		d *= p.Multiplier
		if d > float64(p.MaxDelay) {
			break
		}
	}
	delay := min(time.Duration(d), p.MaxDelay)
	if p.Jitter != nil && *p.Jitter {
		delay = time.Duration(float64(delay) * (0.5 + rand.Float64()))
	}
	return max(delay, retryAfter)
}

// Horizon is the longest a command may keep being redelivered for retries:
// every delay of the policy, at their maximum, plus the AckWait of each
// delivery. Journal retention must exceed it.
func (p RetryPolicy) Horizon(maxDeliver int, ackWait time.Duration) time.Duration {
	var total time.Duration
	for n := 1; n < maxDeliver; n++ {
		d := float64(p.InitialDelay)
		for i := 1; i < n; i++ {
			d = min(d*p.Multiplier, float64(p.MaxDelay))
		}
		total += time.Duration(min(d, float64(p.MaxDelay))*1.5) + ackWait
	}
	return total
}

// backOff returns a cenkalti/backoff exponential schedule for in-lease
// retries, honouring the policy with MaxElapsedTime set explicitly (the
// library's default of 15 minutes would silently stop retrying).
func (p RetryPolicy) backOff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = p.InitialDelay
	b.Multiplier = p.Multiplier
	b.MaxInterval = p.MaxDelay
	b.MaxElapsedTime = p.MaxElapsed
	b.RandomizationFactor = 0
	if p.Jitter != nil && *p.Jitter {
		b.RandomizationFactor = 0.5
	}
	b.Reset()
	return b
}

// Rules map safe error codes to classes: the article's rules block. A code
// not listed keeps the class its adapter gave; an error of no known class is
// treated as reconcile_before_retry, the only safe guess.
type Rules struct {
	Retry                []string `mapstructure:"retry"`
	ReconcileBeforeRetry []string `mapstructure:"reconcile_before_retry"`
	NeverRetry           []string `mapstructure:"never_retry"`
}

// DefaultRules are the article's example rules plus the codes adapters share.
func DefaultRules() Rules {
	return Rules{
		Retry: []string{
			adapters.CodeConnectionResetBeforeResponse, adapters.CodeConnectionRefused,
			adapters.CodeHTTP429, adapters.CodeHTTP502, adapters.CodeHTTP503,
		},
		ReconcileBeforeRetry: []string{
			adapters.CodeTimeoutAfterRequestSent, adapters.CodeConnectionLostWhileWaiting,
			adapters.CodeHTTP500, adapters.CodeHTTP504, adapters.CodeUnexpectedResponse,
		},
		NeverRetry: []string{
			adapters.CodeValidation, adapters.CodeAuthorizationDenied,
			adapters.CodeKeyPayloadMismatch, adapters.CodeInsufficientFunds, adapters.CodeDeclined,
		},
	}
}

// classifier is the compiled form of Rules.
type classifier map[string]adapters.Class

func (r Rules) compile() (classifier, error) {
	c := classifier{}
	add := func(codes []string, class adapters.Class) error {
		for _, code := range codes {
			if prev, ok := c[code]; ok && prev != class {
				return fmt.Errorf("rules: code %q is listed as both %s and %s", code, prev, class)
			}
			c[code] = class
		}
		return nil
	}
	if err := add(r.Retry, adapters.Retry); err != nil {
		return nil, err
	}
	if err := add(r.ReconcileBeforeRetry, adapters.ReconcileBeforeRetry); err != nil {
		return nil, err
	}
	if err := add(r.NeverRetry, adapters.NeverRetry); err != nil {
		return nil, err
	}
	return c, nil
}

// classify returns the class and safe code of an adapter error.
func (c classifier) classify(err error) (adapters.Class, *adapters.Error) {
	ae := adapters.AsError(err)
	if class, ok := c[ae.Code]; ok {
		return class, ae
	}
	if ae.Class.Valid() {
		return ae.Class, ae
	}
	return adapters.ReconcileBeforeRetry, ae
}
