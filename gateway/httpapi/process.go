package httpapi

import (
	"net/http"

	"github.com/idemgate/idemgate/gateway"
	"github.com/idemgate/idemgate/process"
)

// ProcessPrefix is where declared processes are served:
//
//	POST /v1/processes/{name}   Idempotency-Key: <intent_id>, the process's input as JSON
//	GET  /v1/processes/{key}    the process's state: each step's status, key and object
//
// with the same headers, status codes and answer document as operations; a
// process takes its steps' time, so 202 pending (Location, Retry-After) is
// the common first answer.
const ProcessPrefix = "/v1/processes/"

func (s *server) processRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST "+ProcessPrefix+"{name}", func(w http.ResponseWriter, r *http.Request) {
		s.submitAs(w, r, process.OperationPrefix+r.PathValue("name"))
	})
	mux.HandleFunc("GET "+ProcessPrefix+"{key}", s.get)
	mux.HandleFunc(ProcessPrefix+"{name}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, POST")
		writeProblem(w, r, http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed",
			"POST /v1/processes/{name} starts a process, GET /v1/processes/{key} reads it.", nil)
	})
}

// processLocation is where a pending process answer is polled.
func processLocation(a gateway.Answer) (string, bool) {
	if _, ok := process.IsProcess(a.Operation); ok && a.OperationKey != "" {
		return ProcessPrefix + a.OperationKey, true
	}
	return "", false
}
