package postgres

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobq/jobq/internal/jsonstr"
)

// Jobs with metadata (a tracer's traceparent on every traced job) are
// encoded at every insert and decoded at every claim, both through
// jsonstr's direct paths (BenchmarkMetadata compares them with
// encoding/json's).

// encodeMetadata turns a job's metadata into the JSON object text the
// statements store in the jsonb column: NULL for none, an empty map
// included (backend.InsertParams stores it as none).
func encodeMetadata(m map[string]string) pgtype.Text {
	if len(m) == 0 {
		return pgtype.Text{}
	}
	return pgtype.Text{String: jsonstr.Object(m), Valid: true}
}

// decodeMetadata reads the metadata column: nil for NULL or an empty
// object. jsonstr's direct path reads the text jsonb prints.
func decodeMetadata(raw []byte) (map[string]string, error) {
	m, err := jsonstr.DecodeObject(string(raw))
	if err != nil {
		return nil, fmt.Errorf("metadata column: %w", err)
	}
	return m, nil
}
