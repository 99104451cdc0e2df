package operation

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func charge(amount int64, cur string) Operation {
	return Operation{Type: TypePaymentCharge, Fields: map[string]any{"amount_minor": amount, "currency": cur}}
}

func TestApprovalPolicyDefaults(t *testing.T) {
	t.Parallel()
	p, err := CompileApprovalPolicy(nil, nil)
	require.NoError(t, err)
	require.Equal(t, Requirement{Required: true, Approvers: 1, TTL: DefaultApprovalTTL}, p.Requires(charge(1, "RUB")))
	require.True(t, p.Requires(Operation{Type: TypePaymentRefund}).Required)
	require.False(t, p.Requires(Operation{Type: TypeTaskCreate}).Required)
	var nilPolicy *ApprovalPolicy
	require.True(t, nilPolicy.Requires(charge(1, "RUB")).Required, "the zero policy keeps the built-in defaults")
}

func TestApprovalPolicyAbove(t *testing.T) {
	t.Parallel()
	p, err := CompileApprovalPolicy(map[string]ApprovalRule{
		TypePaymentCharge: {Mode: ApprovalAbove, Above: map[string]int64{"rub": 5_000_000}, TwoAbove: map[string]int64{"RUB": 50_000_000},
			Groups: []string{"finance"}, TTL: time.Hour},
		TypePaymentRefund: {Mode: ApprovalNone},
	}, nil)
	require.NoError(t, err)
	for _, tc := range []struct {
		amount int64
		cur    string
		want   Requirement
	}{
		{5_000_000, "RUB", Requirement{}},
		{5_000_001, "RUB", Requirement{Required: true, Approvers: 1, Groups: []string{"finance"}, TTL: time.Hour}},
		{50_000_001, "RUB", Requirement{Required: true, Approvers: 2, Groups: []string{"finance"}, TTL: time.Hour}},
		{1, "USD", Requirement{Required: true, Approvers: 1, Groups: []string{"finance"}, TTL: time.Hour}}, // no USD threshold: waits
	} {
		require.Equal(t, tc.want, p.Requires(charge(tc.amount, tc.cur)), "%d %s", tc.amount, tc.cur)
	}
	require.False(t, p.Requires(Operation{Type: TypePaymentRefund}).Required)
	require.Equal(t, time.Duration(DefaultApprovalTTL), p.MaxTTL())
}

func TestApprovalPolicyRefused(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		rules map[string]ApprovalRule
		want  string
	}{
		"unknown type":       {map[string]ApprovalRule{"payment.nothing": {Mode: ApprovalRequired}}, "payment.nothing: unknown operation type"},
		"unknown mode":       {map[string]ApprovalRule{TypePaymentCharge: {Mode: "sometimes"}}, `approval "sometimes": none, required or above`},
		"above without":      {map[string]ApprovalRule{TypePaymentCharge: {Mode: ApprovalAbove}}, "above needs thresholds"},
		"thresholds without": {map[string]ApprovalRule{TypePaymentCharge: {Mode: ApprovalRequired, Above: map[string]int64{"RUB": 1}}}, "thresholds need approval: above"},
		"no amount":          {map[string]ApprovalRule{TypeTaskCreate: {Mode: ApprovalAbove, Above: map[string]int64{"RUB": 1}}}, "needs the type to have amount_minor"},
		"second below first": {map[string]ApprovalRule{TypePaymentCharge: {Mode: ApprovalAbove, Above: map[string]int64{"RUB": 10}, TwoAbove: map[string]int64{"RUB": 10}}}, "two_approvers_above.RUB 10 must exceed above.RUB 10"},
		"bad currency":       {map[string]ApprovalRule{TypePaymentCharge: {Mode: ApprovalAbove, Above: map[string]int64{"RU": 1}}}, "a currency is three letters"},
		"negative":           {map[string]ApprovalRule{TypePaymentCharge: {Mode: ApprovalAbove, Above: map[string]int64{"RUB": -1}}}, "0 or more"},
		"approvers":          {map[string]ApprovalRule{TypePaymentCharge: {Approvers: 9}}, "approvers 9: between 1 and 5"},
		"group":              {map[string]ApprovalRule{TypePaymentCharge: {Groups: []string{"Finance Team"}}}, `group "Finance Team"`},
		"ttl":                {map[string]ApprovalRule{TypePaymentCharge: {TTL: time.Millisecond}}, "approval_ttl 1ms"},
		"none with extras":   {map[string]ApprovalRule{TypePaymentCharge: {Mode: ApprovalNone, Approvers: 2}}, "approval: none takes no approvers"},
	} {
		_, err := CompileApprovalPolicy(tc.rules, nil)
		require.ErrorIs(t, err, ErrApprovalPolicy, name)
		require.ErrorContains(t, err, tc.want, name)
	}
}
