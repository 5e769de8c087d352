package postgres

import (
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"
)

// encodeMetadata turns a job's metadata into the JSON object text the
// statements store in the jsonb column: NULL for none, an empty map
// included (backend.InsertParams stores it as none).
func encodeMetadata(m map[string]string) pgtype.Text {
	if len(m) == 0 {
		return pgtype.Text{}
	}
	// A map of strings always marshals; ValidateMetadata has refused what
	// jsonb could not hold (invalid UTF-8, NUL).
	text, _ := json.Marshal(m)
	return pgtype.Text{String: string(text), Valid: true}
}

// decodeMetadata reads the metadata column: nil for NULL or an empty
// object.
func decodeMetadata(raw []byte) (map[string]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("metadata is not a JSON object of strings: %w", err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}
