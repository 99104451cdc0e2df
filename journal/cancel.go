package journal

import (
	"context"
	"fmt"
)

// Claimer is what CancelUnclaimed needs of a Store: a claim and a
// completion.
type Claimer interface {
	Claim(ctx context.Context, reqs []ClaimRequest) ([]Claim, error)
	Complete(ctx context.Context, cs []Completion) ([]error, error)
}

// CancelUnclaimed ends r's operation failed_final with code before any
// worker has claimed it — nothing was sent to the target, and the command
// that later reaches a worker is answered with the stored failure, never
// executed. It claims the key as a worker would, so the journal's own
// decision settles any race with a worker: cancelled is true only when
// this claim made the row (its first attempt), and that attempt is closed
// at once with note. Any other decision leaves the operation as it was and
// cancelled false: a live lease or a settled row is only read; a row this
// claim took over (a retryable failure, or an unknown outcome) is handed
// back as it was at once, with a note in its trail.
func CancelUnclaimed(ctx context.Context, s Claimer, r ClaimRequest, code, note string) (cancelled bool, c Claim, err error) {
	cs, err := s.Claim(ctx, []ClaimRequest{r})
	if err != nil {
		return false, Claim{}, fmt.Errorf("cancel %s: claim: %w", r.Key, err)
	}
	c = cs[0]
	switch {
	case c.Decision == Execute && c.Attempt == 1:
		err := completeOne(ctx, s, Completion{Key: r.Key, Token: c.Token, Status: StatusFailedFinal, ErrorCode: code, Note: note})
		if err != nil {
			return false, c, fmt.Errorf("cancel %s: %w", r.Key, err)
		}
		return true, c, nil
	case c.Decision == Execute:
		// A retryable failure taken over: an earlier attempt reached the
		// target, so it is not ours to cancel. Handed back for its retry.
		err = completeOne(ctx, s, Completion{Key: r.Key, Token: c.Token, Status: StatusFailedRetryable, ErrorCode: c.Record.ErrorCode,
			Note: "cancel refused: an earlier attempt was sent"})
	case c.Decision == Reconcile:
		err = completeOne(ctx, s, Completion{Key: r.Key, Token: c.Token, Status: StatusUnknown, ErrorCode: c.Record.ErrorCode,
			Note: "cancel refused: the outcome is unknown"})
	}
	if err != nil {
		return false, c, fmt.Errorf("cancel %s: hand back: %w", r.Key, err)
	}
	return false, c, nil
}

func completeOne(ctx context.Context, s Claimer, c Completion) error {
	errs, err := s.Complete(ctx, []Completion{c})
	if err != nil {
		return err
	}
	return errs[0]
}
