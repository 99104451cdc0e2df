package sqljournal

import "strings"

// EndFirstAttempt is the part of an engine's completion that closes the
// first attempt a log row holds (migration 0011): each pair of colVals, a
// first_* column and the value it takes, is set when the row holds its
// first attempt and that attempt is still open, and kept otherwise — so
// only the completion that ends the first attempt writes them, on either
// engine. alias prefixes the row's columns where the statement reads the
// row under one ("l." on PostgreSQL, "" on SQLite). The pairs come out
// comma-separated, ready to follow the other assignments of a SET.
func EndFirstAttempt(alias string, colVals ...string) string {
	if len(colVals)%2 != 0 {
		panic("sqljournal: EndFirstAttempt takes column, value pairs")
	}
	open := alias + "first_attempt_inline AND " + alias + "first_finished_at IS NULL"
	var b strings.Builder
	for i := 0; i < len(colVals); i += 2 {
		col, val := colVals[i], colVals[i+1]
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n        " + col + " = CASE WHEN " + open + " THEN " + val + " ELSE " + alias + col + " END")
	}
	return b.String()
}
