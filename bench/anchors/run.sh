#!/usr/bin/env bash
# Compares jobq with its anchors on this machine (issue 38), in interleaved
# rounds so that a machine whose speed drifts affects both sides alike:
#
#   latency  jobq bench --workload latency --worker-process on PostgreSQL
#            against cmd/riverlat (River, insert-only client + worker
#            client in a second process): pickup p50/p90/p99/max
#   memory   cmd/jobqmem against cmd/asynqmem (Asynq) on Redis: peak RSS
#            of the process draining the jobs, and jobs/s
#
# Each round runs both pairs, the first of each pair alternating round by
# round; at the end cmd/median prints each figure's median and spread
# (min-max) and the issue's ratios, taken round by round.
#
# Usage: bench/anchors/run.sh [-r ROUNDS] [-o latency|memory] [-s]
#   -r  rounds (default 5)
#   -o  run only one pair
#   -s  smoke: tiny sizes (rate 50 for 2 s, 2,000 jobs) and 1 round unless
#       -r is given; checks the harness works, measures nothing
#
# Environment: ANCHORS_PG (default postgres://postgres@127.0.0.1:5432/test;
# schemas anchors_jobq and anchors_river are made and dropped),
# ANCHORS_ASYNQ_REDIS (redis://127.0.0.1:6379/9) and ANCHORS_JOBQ_REDIS
# (redis://127.0.0.1:6379/10?key_prefix=anchors): logical databases of
# their own, FLUSHDB'd before and after each run; ANCHORS_OUT, where the
# raw result lines go (default /tmp/anchors-results.tsv). Needs go and psql.
set -euo pipefail

rounds=5 only=all smoke=0 rounds_given=0
while getopts 'r:o:sh' opt; do
	case $opt in
	r) rounds=$OPTARG rounds_given=1 ;;
	o) only=$OPTARG ;;
	s) smoke=1 ;;
	*) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
case $only in all | latency | memory) ;; *) echo "run.sh: -o latency or -o memory" >&2; exit 2 ;; esac

rate=200 duration=10s workers=100 jobs=50000
if ((smoke)); then
	rate=50 duration=2s jobs=2000
	((rounds_given)) || rounds=1
fi

pg=${ANCHORS_PG:-postgres://postgres@127.0.0.1:5432/test}
jobq_schema=anchors_jobq river_schema=anchors_river
asynq_redis=${ANCHORS_ASYNQ_REDIS:-redis://127.0.0.1:6379/9}
jobq_redis=${ANCHORS_JOBQ_REDIS:-redis://127.0.0.1:6379/10?key_prefix=anchors}
out=${ANCHORS_OUT:-/tmp/anchors-results.tsv}
sep='?'
[[ $pg == *'?'* ]] && sep='&'

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$(mktemp -d)

sql() { PGOPTIONS='-c client_min_messages=warning' psql -X -q -v ON_ERROR_STOP=1 "$pg" -c "$1"; }
cleanup() {
	# riverlat drops its schema and the memory programs flush their
	# databases themselves; this catches a run that was cut short.
	sql "DROP SCHEMA IF EXISTS $jobq_schema CASCADE; DROP SCHEMA IF EXISTS $river_schema CASCADE" || true
	rm -rf "$bin"
}
trap cleanup EXIT

echo "building into $bin" >&2
(cd "$root" && go build -o "$bin/jobq" ./cmd/jobq)
(cd "$here" && go build -o "$bin/" \
	-ldflags "-X github.com/jobq/jobq/bench/anchors/internal/anchor.tree=$(git -C "$root" describe --always --dirty)" \
	./cmd/riverlat ./cmd/asynqmem ./cmd/jobqmem ./cmd/median)

# run LABEL CMD...: runs one variant and appends its last stdout line,
# labelled, to $out.
run() {
	local label=$1 line
	shift
	if ! line=$("$@" 2>"$bin/$label.err" | tail -n 1) || [[ $line != "{"* ]]; then
		echo "run.sh: $label failed: $*" >&2
		tail -n 5 "$bin/$label.err" >&2
		exit 1
	fi
	printf '%s\t%s\n' "$label" "$line" >>"$out"
	echo "round $r $label $line" >&2
}

jobq_lat() {
	sql "DROP SCHEMA IF EXISTS $jobq_schema CASCADE" # fresh, as riverlat's
	run jobq-lat "$bin/jobq" bench --db "$pg${sep}jobq_schema=$jobq_schema" --workload latency --worker-process \
		--rate "$rate" --duration "$duration" --workers "$workers"
}
river_lat() {
	run river-lat "$bin/riverlat" -db "$pg" -schema "$river_schema" -rate "$rate" -duration "$duration" \
		-workers "$workers" -fetch-cooldown 1ms -fetch-poll-interval 50ms
}
jobq_mem() { run jobq-mem "$bin/jobqmem" -redis "$jobq_redis" -n "$jobs" -workers "$workers"; }
asynq_mem() { run asynq-mem "$bin/asynqmem" -redis "$asynq_redis" -n "$jobs" -workers "$workers"; }

: >"$out"
for ((r = 1; r <= rounds; r++)); do
	if [[ $only != memory ]]; then
		if ((r % 2)); then jobq_lat; river_lat; else river_lat; jobq_lat; fi
	fi
	if [[ $only != latency ]]; then
		if ((r % 2)); then asynq_mem; jobq_mem; else jobq_mem; asynq_mem; fi
	fi
done

ratios=()
if [[ $only != memory ]]; then
	ratios+=(-ratio 'jobq-lat/river-lat:p99_ms<=0.5' -ratio 'jobq-lat/river-lat:p50_ms')
fi
if [[ $only != latency ]]; then
	ratios+=(-ratio 'jobq-mem/asynq-mem:peak_rss_mb<=1' -ratio 'jobq-mem/asynq-mem:drain_peak_rss_mb<=1'
		-ratio 'jobq-mem/asynq-mem:jobs_per_sec')
fi
echo
((smoke)) && echo "SMOKE RUN: tiny sizes, not a measurement"
echo "rounds: $rounds; latency: rate $rate/s for $duration, $workers workers; memory: $jobs jobs, $workers workers"
echo "raw lines: $out"
echo
"$bin/median" "${ratios[@]}" <"$out"
