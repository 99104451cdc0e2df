package wire

import (
	"net/http"
	"net/textproto"
	"testing"
)

// TestHeaderNamesSurviveCanonicalisation: every header name is already in
// canonical MIME form, so a header set through net/http keeps the exact
// spelling NATS matches on.
func TestHeaderNamesSurviveCanonicalisation(t *testing.T) {
	for _, name := range []string{HeaderMsgID, HeaderReplyTo, HeaderOperationKey, HeaderSource} {
		if c := textproto.CanonicalMIMEHeaderKey(name); c != name {
			t.Errorf("header %q is not canonical (%q): net/http would respell it and nats.Header.Get would miss it", name, c)
		}
		h := http.Header{}
		h.Set(name, "v")
		if got := map[string][]string(h)[name]; len(got) != 1 || got[0] != "v" {
			t.Errorf("header %q set through http.Header is stored as %v", name, h)
		}
	}
}

func TestGetReadsExactThenAnyCase(t *testing.T) {
	h := map[string][]string{"idemgate-reply-to": {"lower"}}
	if got := Get(h, HeaderReplyTo); got != "lower" {
		t.Errorf("Get of a lowercase header = %q, want lower", got)
	}
	h[HeaderReplyTo] = []string{"exact"}
	if got := Get(h, HeaderReplyTo); got != "exact" {
		t.Errorf("Get with an exact match = %q, want exact", got)
	}
	if got := Get(nil, HeaderMsgID); got != "" {
		t.Errorf("Get on no headers = %q", got)
	}
}

func TestResultMsgID(t *testing.T) {
	for _, c := range []struct {
		key, status string
		seq         uint64
		want        string
	}{
		{"payment.charge:v1:7f", "succeeded", 9, "payment.charge:v1:7f:succeeded"},
		{"", "rejected", 42, "_rejected:42"},
		{"", "rejected", 0, ""},
	} {
		if got := ResultMsgID(c.key, c.status, c.seq); got != c.want {
			t.Errorf("ResultMsgID(%q, %q, %d) = %q, want %q", c.key, c.status, c.seq, got, c.want)
		}
	}
}

func TestSubjects(t *testing.T) {
	if got := CommandSubject("payment.charge"); got != "idemgate.cmd.payment.charge" {
		t.Errorf("CommandSubject = %q", got)
	}
	if got := ResultSubjectFor("payment.charge", ""); got != RejectedSubject {
		t.Errorf("a keyless result goes to %q, want %q", got, RejectedSubject)
	}
	if got := ResultSubjectFor("payment.charge", "k"); got != "idemgate.res.payment.charge" {
		t.Errorf("ResultSubjectFor = %q", got)
	}
	if got := ResultSubject(""); got != RejectedSubject {
		t.Errorf("ResultSubject(\"\") = %q", got)
	}
	if op, ok := OperationFromSubject("idemgate.cmd.crm.deal"); !ok || op != "crm.deal" {
		t.Errorf("OperationFromSubject = %q, %v", op, ok)
	}
	for _, s := range []string{"idemgate.cmd.", "idemgate.res.crm.deal", "other"} {
		if _, ok := OperationFromSubject(s); ok {
			t.Errorf("OperationFromSubject(%q) accepted", s)
		}
	}
}
