package onec

import (
	"encoding/json"
	"fmt"

	"github.com/idemgate/idemgate/adapters"
)

type jsonNumber = json.Number

func jsonBody(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, adapters.NewError(adapters.CodeValidation, adapters.NeverRetry, fmt.Errorf("onec: encode request: %w", err))
	}
	return b, nil
}
