package amocrm

import (
	"encoding/json"
	"strings"

	"github.com/idemgate/idemgate/adapters"
)

type fieldValue struct {
	Value any `json:"value"`
}

type customField struct {
	FieldID int64        `json:"field_id"`
	Values  []fieldValue `json:"values"`
}

type tagIn struct {
	Name string `json:"name"`
}

type idRef struct {
	ID int64 `json:"id"`
}

type leadIn struct {
	Name               string        `json:"name"`
	Price              int64         `json:"price"`
	PipelineID         int64         `json:"pipeline_id,omitempty"`
	StatusID           int64         `json:"status_id,omitempty"`
	CustomFieldsValues []customField `json:"custom_fields_values,omitempty"`
	Embedded           struct {
		Tags     []tagIn `json:"tags,omitempty"`
		Contacts []idRef `json:"contacts,omitempty"`
	} `json:"_embedded"`
	RequestID string `json:"request_id"`
}

type taskIn struct {
	Text              string `json:"text"`
	CompleteTill      int64  `json:"complete_till"`
	EntityID          int64  `json:"entity_id,omitempty"`
	EntityType        string `json:"entity_type,omitempty"`
	TaskTypeID        int64  `json:"task_type_id"`
	ResponsibleUserID int64  `json:"responsible_user_id"`
	RequestID         string `json:"request_id"`
}

type leadOut struct {
	ID                 int64         `json:"id"`
	Name               string        `json:"name"`
	Price              int64         `json:"price"`
	CustomFieldsValues []customField `json:"custom_fields_values"`
	Embedded           struct {
		Tags []tagIn `json:"tags"`
	} `json:"_embedded"`
}

// holdsKey verifies a search hit exactly: the key field's value, or
// (without a field) a tag, or the marker in the name.
func (l leadOut) holdsKey(key string, fieldID int64) bool {
	if strings.Contains(l.Name, adapters.Marker(key)) {
		return true
	}
	if fieldID > 0 {
		for _, cf := range l.CustomFieldsValues {
			if cf.FieldID == fieldID {
				for _, v := range cf.Values {
					if s, ok := v.Value.(string); ok && s == key {
						return true
					}
				}
			}
		}
		return false
	}
	for _, t := range l.Embedded.Tags {
		if t.Name == key {
			return true
		}
	}
	return false
}

type taskOut struct {
	ID          int64  `json:"id"`
	Text        string `json:"text"`
	IsCompleted bool   `json:"is_completed"`
}

// parseLeads reads {"_embedded":{"leads":[…]}}.
func parseLeads(b []byte) ([]leadOut, error) { return parseList[leadOut, leadList](b, "lead") }

// parseTasks reads {"_embedded":{"tasks":[…]}}.
func parseTasks(b []byte) ([]taskOut, error) { return parseList[taskOut, taskList](b, "task") }

type leadList struct {
	Leads []leadOut `json:"leads"`
}

type taskList struct {
	Tasks []taskOut `json:"tasks"`
}

func (l leadList) items() []leadOut { return l.Leads }
func (l taskList) items() []taskOut { return l.Tasks }
func (l leadOut) objectID() int64   { return l.ID }
func (t taskOut) objectID() int64   { return t.ID }

// parseList reads a list answer, {"_embedded": L}, whose objects (what:
// lead, task) must each carry a usable id.
func parseList[T interface{ objectID() int64 }, L interface{ items() []T }](b []byte, what string) ([]T, error) {
	var r struct {
		Embedded *L `json:"_embedded"`
	}
	if err := adapters.DecodeJSON(b, &r, adapters.ReconcileBeforeRetry, "amoCRM "+what+" list"); err != nil {
		return nil, err
	}
	if r.Embedded == nil {
		return nil, adapters.Unexpected(adapters.ReconcileBeforeRetry, "amoCRM %s list without _embedded", what)
	}
	items := (*r.Embedded).items()
	for _, it := range items {
		if it.objectID() <= 0 {
			return nil, adapters.Unexpected(adapters.ReconcileBeforeRetry, "amoCRM %s without a usable id", what)
		}
	}
	return items, nil
}

// parseCreated reads the one created object of a batch POST answer.
func parseCreated(b []byte, kind, requestID string) (int64, error) {
	var r struct {
		Embedded map[string][]struct {
			ID        int64           `json:"id"`
			RequestID json.RawMessage `json:"request_id"`
		} `json:"_embedded"`
	}
	if err := adapters.DecodeJSON(b, &r, adapters.ReconcileBeforeRetry, "amoCRM create answer"); err != nil {
		return 0, err
	}
	got := r.Embedded[kind]
	if len(got) != 1 || got[0].ID <= 0 {
		return 0, adapters.Unexpected(adapters.ReconcileBeforeRetry, "amoCRM create answer without exactly one %s id", kind)
	}
	var rid string
	if len(got[0].RequestID) > 0 && json.Unmarshal(got[0].RequestID, &rid) == nil && rid != "" && rid != requestID {
		return 0, adapters.Unexpected(adapters.ReconcileBeforeRetry, "amoCRM create answer for another request_id")
	}
	return got[0].ID, nil
}
