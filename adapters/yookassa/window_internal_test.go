package yookassa

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/adapters"
	"github.com/idemgate/idemgate/redact"
)

func planAdapter(t *testing.T, mod func(*Config)) *Adapter {
	t.Helper()
	cfg := Config{BaseURL: "http://127.0.0.1:1", ShopID: "1", SecretKey: adapters.SecretKey{Value: redact.Secret("s")}}
	if mod != nil {
		mod(&cfg)
	}
	a, err := New(cfg)
	require.NoError(t, err)
	return a
}

// The window is bounded by the calls: a lookup an hour or a week after
// them reads the same parts. The one-payment read starts at the core (the
// calls' own time within coreMargin) and goes down, then reads the rest
// up to LookupSkew + LookupLate after the calls; a full read (connector
// declared) reads the calls' window, then the rest.
func TestPlanIsBoundedByTheCalls(t *testing.T) {
	t.Parallel()
	a := planAdapter(t, nil) // skew 5m, late 1m, timeout 30s
	since := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	until := since.Add(2 * time.Second)
	ctx := adapters.WithAttempt(context.Background(), adapters.Attempt{Number: 2, Since: since, Until: until})
	for _, later := range []time.Duration{10 * time.Minute, time.Hour, 7 * 24 * time.Hour} {
		w := a.plan(ctx, until.Add(later))
		require.True(t, w.single, "the calls fell within the key's lifetime, whenever the lookup comes")
		require.True(t, w.closed, "the window's end is past")
		require.Equal(t, []part{
			{span: span{ms(since.Add(-5 * time.Minute)), ms(until.Add(time.Second))}},
			{span: span{ms(until.Add(time.Second)) + 1, ms(until.Add(6 * time.Minute))}},
		}, w.parts, "after %v", later)
	}

	full := planAdapter(t, func(c *Config) { c.ConnectorDropsKey = true })
	w := full.plan(ctx, until.Add(time.Hour))
	require.False(t, w.single)
	require.True(t, w.closed)
	require.Equal(t, []part{
		{span: span{ms(since.Add(-5 * time.Minute)), ms(until.Add(5 * time.Minute))}, stage: true},
		{span: span{ms(until.Add(5*time.Minute)) + 1, ms(until.Add(6 * time.Minute))}},
	}, w.parts)
	require.False(t, a.plan(ctx, until.Add(5*time.Minute)).closed, "a payment may still appear")

	// Calls spread over more than the key's lifetime: any lookup reads all.
	long := adapters.WithAttempt(context.Background(), adapters.Attempt{Number: 9, Since: since, Until: since.Add(24 * time.Hour)})
	require.False(t, a.plan(long, since.Add(25*time.Hour)).single)

	// While a call may still run the window reaches up to the read.
	open := adapters.WithAttempt(context.Background(), adapters.Attempt{Number: 2, Since: since})
	w = a.plan(open, since.Add(time.Hour))
	require.True(t, w.single)
	require.False(t, w.closed)
	require.Equal(t, openEnd, w.parts[len(w.parts)-1].hi)
	// Without the key's first sight: LookupWindow back, up to the read.
	w = a.plan(context.Background(), since)
	require.False(t, w.single || w.closed)
	require.Equal(t, []part{{span: span{ms(since.Add(-DefaultLookupWindow)), openEnd}}}, w.parts)
}

func TestProgressKeepsWhatWasRead(t *testing.T) {
	t.Parallel()
	var p progress
	p.add(span{100, 199})
	p.add(span{300, 399})
	p.add(span{200, 250}) // adjacent to the first: merged
	require.Equal(t, []span{{100, 250}, {300, 399}}, p.read)
	require.Equal(t, []part{{span: span{400, 500}}, {span: span{251, 299}}, {span: span{0, 99}, stage: true}},
		p.unread(part{span: span{0, 500}, stage: true}), "the gaps, newest first; the stage on the oldest")
	require.Equal(t, []part{{span: span{120, 119}, stage: true}}, p.unread(part{span: span{120, 240}, stage: true}),
		"read before: the stage still ends there")
	require.Empty(t, p.unread(part{span: span{300, 399}}))
	p.add(span{0, 1000})
	require.Equal(t, []span{{0, 1000}}, p.read)
}
