package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// recheck runs the checker again over the history a run saved in dir (the
// history-*.jsonl files, the journal dump, the logs and the report's run
// facts), e.g. after the checker changed. The consumer's state is not saved:
// it is taken from the saved report's lost examples ("consumer").
func recheck(dir string, known map[string]bool) (Report, error) {
	var h History
	var old Report
	b, err := os.ReadFile(filepath.Join(dir, "soak-report.json"))
	if err != nil {
		return Report{}, err
	}
	if err := json.Unmarshal(b, &old); err != nil {
		return Report{}, fmt.Errorf("soak-report.json: %w", err)
	}
	h.Windows = old.Windows
	for _, iv := range old.Invariants {
		for _, e := range iv.Examples {
			if iv.Name == InvLost && strings.HasPrefix(e, "consumer: ") {
				_, _ = fmt.Sscanf(strings.TrimPrefix(e, "consumer: "), "%d", &h.Unacked)
			}
		}
	}
	h.NativeOnly = map[string]bool{"onec": true, "yookassa": true}
	if err := errors.Join(readJSONL(dir, sentFile, &h.Sent), readJSONL(dir, resultsFile, &h.Results),
		readJSONL(dir, effectsFile, &h.Effects), readJSONL(dir, attemptsFile, &h.Attempts), readJSONL(dir, processFile, &h.Processes)); err != nil {
		return Report{}, err
	}
	// Journal rows from the dump (its attempts lines have no request_hash).
	var dump []byte
	if err := eachLine(dir, "logs/journal-dump.jsonl", func(l []byte) error {
		dump = append(append(dump, l...), '\n')
		var r struct {
			Key    string  `json:"operation_key"`
			Status string  `json:"status"`
			Object *string `json:"target_object_id"`
			Hash   *string `json:"request_hash"`
			Token  int64   `json:"lease_token"`
		}
		if err := json.Unmarshal(l, &r); err != nil {
			return err
		}
		if r.Hash == nil {
			return nil
		}
		row := Row{Key: r.Key, Status: r.Status, RequestHash: *r.Hash, Token: r.Token}
		if r.Object != nil {
			row.ObjectID = *r.Object
		}
		h.Rows = append(h.Rows, row)
		return nil
	}); err != nil {
		return Report{}, err
	}
	h.Texts = append(h.Texts, Text{Where: "journal dump", Body: dump})
	rep := Check(h, known)
	rep.Run = old.Run
	return rep, nil
}
