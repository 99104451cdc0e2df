package sqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/idemgate/idemgate/journal"
	"github.com/idemgate/idemgate/journal/sqlite"
)

// The test binary doubles as the second process of TestSecondProcess: with
// these variables set, TestMain runs child instead of the tests.
const (
	envChildDB   = "IDEMGATE_SQLITE_CHILD_DB"
	envChildKeys = "IDEMGATE_SQLITE_CHILD_KEYS"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(envChildDB); path != "" {
		if err := child(path, os.Getenv(envChildKeys)); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func sharedKey(i int) string { return fmt.Sprintf("test:payment.charge:shared-%d:v1", i) }

func sharedReq(k, owner string) journal.ClaimRequest {
	return journal.ClaimRequest{
		Key: k, OperationType: "payment.charge", RequestHash: "h", TargetSystem: "payments",
		EventID: "evt-" + k, Owner: owner, LeaseTTL: time.Minute,
	}
}

// claimAll claims keys 0..n-1 in batches of batch, completes what it was
// given to execute as succeeded (with the owner as object id), and returns
// the keys it executed.
func claimAll(ctx context.Context, s journal.Store, owner string, n, batch int) ([]string, error) {
	var executed []string
	for lo := 0; lo < n; lo += batch {
		var reqs []journal.ClaimRequest
		for i := lo; i < min(lo+batch, n); i++ {
			reqs = append(reqs, sharedReq(sharedKey(i), owner))
		}
		got, err := s.Claim(ctx, reqs)
		if err != nil {
			return nil, err
		}
		var done []journal.Completion
		for _, c := range got {
			switch c.Decision {
			case journal.Execute:
				executed = append(executed, c.Record.Key)
				done = append(done, journal.Completion{Key: c.Record.Key, Token: c.Token, Status: journal.StatusSucceeded, TargetObjectID: owner})
			case journal.InProgress, journal.ReplaySucceeded:
			default:
				return nil, fmt.Errorf("%s: unexpected decision %s", c.Record.Key, c.Decision)
			}
		}
		errs, err := s.Complete(ctx, done)
		if err != nil {
			return nil, err
		}
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
	}
	return executed, nil
}

// child is the second process: it opens the same file, says "ready", waits
// for "go", claims every key and prints those it executed.
func child(path, keys string) error {
	n, err := strconv.Atoi(keys)
	if err != nil {
		return fmt.Errorf("key count: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Println("ready")
	if line, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil || line != "go\n" {
		return fmt.Errorf("waiting for go: %q %v", line, err)
	}
	executed, err := claimAll(ctx, s, "child", n, 10)
	if err != nil {
		return err
	}
	for _, k := range executed {
		fmt.Println("executed", k)
	}
	return nil
}

// TestSecondProcess opens the database from a second process while this one
// holds it open, and races both over the same keys: WAL lets both work, and
// the write lock lets exactly one of them execute each key.
func TestSecondProcess(t *testing.T) {
	t.Parallel()
	const n = 300
	path := filepath.Join(t.TempDir(), "journal.db")
	s := openAt(t, path)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), envChildDB+"="+path, envChildKeys+"="+strconv.Itoa(n))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	out := bufio.NewScanner(stdout)
	require.True(t, out.Scan(), "child said nothing: %s", stderr.String())
	require.Equal(t, "ready", out.Text(), stderr.String())

	// Both go at once.
	_, err = io.WriteString(stdin, "go\n")
	require.NoError(t, err)
	require.NoError(t, stdin.Close())
	mine, err := claimAll(ctx, s, "parent", n, 10)
	require.NoError(t, err)
	var theirs []string
	for out.Scan() {
		k, ok := strings.CutPrefix(out.Text(), "executed ")
		require.True(t, ok, "child printed %q", out.Text())
		theirs = append(theirs, k)
	}
	require.NoError(t, cmd.Wait(), stderr.String())

	owner := map[string]string{}
	for _, k := range mine {
		owner[k] = "parent"
	}
	for _, k := range theirs {
		require.NotContains(t, owner, k, "both processes executed %s", k)
		owner[k] = "child"
	}
	require.Len(t, owner, n, "every key executed once")
	t.Logf("parent executed %d keys, child %d", len(mine), len(theirs))

	// The child's commits are visible here: every key replays its one owner.
	for i := range n {
		k := sharedKey(i)
		c, err := journal.ClaimOne(ctx, s, sharedReq(k, "late"))
		require.NoError(t, err)
		require.Equal(t, journal.ReplaySucceeded, c.Decision, k)
		require.Equal(t, owner[k], c.Record.TargetObjectID, k)
		att, err := s.Attempts(ctx, k)
		require.NoError(t, err)
		require.Len(t, att, 1, k)
	}
}

// TestTwoStoresOneFile races two stores on one file, several goroutines
// each, over the same keys, then over take-overs of the same stale rows.
func TestTwoStoresOneFile(t *testing.T) {
	t.Parallel()
	const n = 200
	path := filepath.Join(t.TempDir(), "journal.db")
	stores := []*sqlite.Store{openAt(t, path), openAt(t, path)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var mu sync.Mutex
	executed := map[string]int{}
	var wg sync.WaitGroup
	for si, s := range stores {
		for g := range 3 {
			wg.Go(func() {
				got, err := claimAll(ctx, s, fmt.Sprintf("s%d-g%d", si, g), n, 1+g*7)
				if !assertNoError(t, err) {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, k := range got {
					executed[k]++
				}
			})
		}
	}
	wg.Wait()
	require.Len(t, executed, n)
	for k, times := range executed {
		require.Equal(t, 1, times, "%s executed %d times", k, times)
	}

	// Unknown outcomes, taken over from both stores at once: each once.
	var unknown []string
	for i := range 40 {
		k := fmt.Sprintf("test:payment.charge:stale-%d:v1", i)
		c, err := journal.ClaimOne(ctx, stores[i%2], sharedReq(k, "w"))
		require.NoError(t, err)
		require.NoError(t, journal.CompleteOne(ctx, stores[i%2], journal.Completion{Key: k, Token: c.Token, Status: journal.StatusUnknown, ErrorCode: "timeout_after_request_sent"}))
		unknown = append(unknown, k)
	}
	taken := map[string]int{}
	for si, s := range stores {
		for g := range 2 {
			wg.Go(func() {
				for {
					got, err := s.TakeOverStale(ctx, fmt.Sprintf("rec-%d-%d", si, g), time.Minute, 3)
					if !assertNoError(t, err) || len(got) == 0 {
						return
					}
					mu.Lock()
					for _, c := range got {
						taken[c.Record.Key]++
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	require.Len(t, taken, len(unknown))
	for _, k := range unknown {
		require.Equal(t, 1, taken[k], "%s taken over %d times", k, taken[k])
	}
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}
