package postgres

import (
	"strconv"

	"github.com/jobq/jobq/backend"
)

// errors (011_attempt_errors.sql) is jsonb: an array of the job's attempt
// errors, oldest first, at most backend.MaxAttemptErrors, NULL for a job
// that never failed. The statements that record an attempt's error
// (sqlComplete's retry and fail, sqlRelease's counted release, sqlSweep,
// sqlTaskSettle) append to it in the statement that writes the error, with
// appendErrors; the ones that move a job between jobs and failed_jobs copy
// it. A done outcome never touches it.

// appendErrors is the SQL of the errors column of the jobs row j (a table
// alias) with one entry appended for the attempt j.attempts counts, at
// now(): took and worker are the SQL of its duration (µs) and worker name,
// msg that of its error text. Past MaxAttemptErrors the oldest entry goes.
// The entry is internal/attemptlog's compact array [attempt, at_us,
// duration_us, worker, error] (see its package doc for why not an object);
// at_us is integer microseconds, so the time reads back exactly whatever
// the session's time zone.
func appendErrors(j, msg, took, worker string) string {
	cur := `coalesce(` + j + `.errors, '[]'::jsonb)`
	return `(CASE WHEN jsonb_array_length(` + cur + `) >= ` + strconv.Itoa(backend.MaxAttemptErrors) +
		` THEN ` + cur + ` - 0 ELSE ` + cur + ` END || jsonb_build_array(jsonb_build_array(
	` + j + `.attempts, (extract(epoch FROM now()) * 1000000)::bigint, ` + took + `, ` + worker + `, ` + msg + `)))`
}
