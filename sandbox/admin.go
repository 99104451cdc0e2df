package sandbox

import (
	"encoding/json"
	"net/http"
)

const adminPrefix = "/_sandbox/"

// The admin API, served by every emulator beside its contract:
//
//	GET    /_sandbox/ledger            {"target":"onec","total":N,"by_key":{key:n},"effects":[Effect…]}
//	GET    /_sandbox/ledger?key=K      {"key":K,"count":n}
//	GET    /_sandbox/faults            {"faults":[{kind,scope,count,rate,delay_ms,retry_after_ms,status,body,commit,remaining}…]}
//	POST   /_sandbox/faults            body: one fault object or an array of them → 204; 400 on a bad rule
//	DELETE /_sandbox/faults            clear all faults → 204
//	POST   /_sandbox/reset             clear faults, ledger and target state → 204
//
// Fault JSON: {"kind":"lose_response_hang","scope":"create","count":1}
// {"kind":"http_429","retry_after_ms":2000,"rate":0.2} {"kind":"delay","delay_ms":500}
func (c *Core) serveAdmin(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case adminPrefix + "ledger":
		if r.Method != http.MethodGet {
			adminError(w, http.StatusMethodNotAllowed, "use GET")
			return
		}
		if r.URL.Query().Has("key") {
			key := r.URL.Query().Get("key")
			WriteJSON(w, http.StatusOK, "", map[string]any{"key": key, "count": c.ledger.Count(key)})
			return
		}
		effects := c.ledger.Effects()
		if effects == nil {
			effects = []Effect{}
		}
		WriteJSON(w, http.StatusOK, "", map[string]any{
			"target": c.spec.Name, "total": len(effects), "by_key": c.ledger.ByKey(), "effects": effects,
		})
	case adminPrefix + "faults":
		switch r.Method {
		case http.MethodGet:
			WriteJSON(w, http.StatusOK, "", map[string]any{"faults": c.faults.list()})
		case http.MethodDelete:
			c.ClearFaults()
			w.WriteHeader(http.StatusNoContent)
		case http.MethodPost:
			body, err := ReadBody(r, 1<<20)
			if err != nil {
				adminError(w, http.StatusBadRequest, err.Error())
				return
			}
			var faults []Fault
			if len(body) > 0 && body[0] == '[' {
				err = json.Unmarshal(body, &faults)
			} else {
				var f Fault
				err = json.Unmarshal(body, &f)
				faults = []Fault{f}
			}
			if err != nil {
				adminError(w, http.StatusBadRequest, "fault JSON: "+err.Error())
				return
			}
			for _, f := range faults {
				if err := f.Validate(); err != nil {
					adminError(w, http.StatusBadRequest, err.Error())
					return
				}
			}
			for _, f := range faults {
				_ = c.InjectFault(f)
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			adminError(w, http.StatusMethodNotAllowed, "use GET, POST or DELETE")
		}
	case adminPrefix + "reset":
		if r.Method != http.MethodPost {
			adminError(w, http.StatusMethodNotAllowed, "use POST")
			return
		}
		c.Reset()
		w.WriteHeader(http.StatusNoContent)
	default:
		adminError(w, http.StatusNotFound, "unknown admin path")
	}
}

func adminError(w http.ResponseWriter, status int, msg string) {
	WriteJSON(w, status, "", map[string]string{"error": msg})
}
