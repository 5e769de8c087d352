package sqlite

import (
	"fmt"

	"github.com/jobq/jobq/internal/jsonstr"
)

// The metadata column holds a job's metadata as a JSON object of strings,
// NULL when there is none, so jobs without metadata, the common case, cost
// nothing to encode or decode. Jobs with metadata are encoded at every
// insert and decoded at every claim, both through jsonstr's direct paths.

// encodeMetadata returns m as the metadata column stores it: a JSON object
// with sorted keys as text, or nil (NULL) when m is empty.
func encodeMetadata(m map[string]string) any {
	if len(m) == 0 {
		return nil
	}
	return jsonstr.Object(m)
}

// decodeMetadata is the inverse of encodeMetadata for the column's value
// (valid false for NULL): nil for NULL or an empty object.
func decodeMetadata(text string, valid bool) (map[string]string, error) {
	if !valid {
		return nil, nil
	}
	m, err := jsonstr.DecodeObject(text)
	if err != nil {
		return nil, fmt.Errorf("decode metadata column: %w", err)
	}
	return m, nil
}
