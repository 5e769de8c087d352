package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
)

// The states of 'jobq check' and their exit codes: the convention of
// monitoring plugins (Nagios, Icinga, Sensu, Zabbix's and cron wrappers).
const (
	checkOK = iota
	checkWarning
	checkCritical
	checkUnknown
)

var checkStates = [...]string{"OK", "WARNING", "CRITICAL", "UNKNOWN"}

// checkExit ends 'jobq check' with its state's exit code once its one
// line of result is printed: main prints nothing more.
type checkExit struct{ code int }

func (e checkExit) Error() string {
	if e.code < 0 || e.code >= len(checkStates) {
		// Other commands end with their own codes the same way.
		return fmt.Sprintf("exit code %d", e.code)
	}
	return "jobq check: " + checkStates[e.code]
}

// limits are one level's thresholds (warning or critical) and the flags
// that set them; a value over a set threshold reaches the level.
type limits struct {
	depth, failed                int64
	wait                         time.Duration
	hasDepth, hasWait, hasFailed bool
	depthFlag, waitFlag          string
	failedFlag, severity         string
}

type checkFlags struct {
	queues     []string
	warn, crit limits
	timeout    time.Duration
}

func (a *app) newCheckCmd() *cobra.Command {
	f := checkFlags{
		warn: limits{depthFlag: "max-depth", waitFlag: "max-wait", failedFlag: "max-failed", severity: "warning"},
		crit: limits{depthFlag: "crit-depth", waitFlag: "crit-wait", failedFlag: "crit-failed", severity: "critical"},
	}
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check queue depth, wait and failed jobs against thresholds: one line, exit 0/1/2/3 (a monitoring plugin)",
		Long: `Check each queue of --db (or those named by --queues) against thresholds and
print one line in the monitoring plugins' format, for cron, Nagios, Icinga
or any monitor that alerts on an exit code:

  JOBQ WARNING - mail: 12000 due (warning over 10000); 2 queues, 12003 due, oldest waiting 4m10s, 0 failed | 'mail depth'=12000;10000;;0 ...

A queue's depth is its jobs due now (pending, not scheduled for later), its
wait how long its oldest due job has been due, its failed count the jobs
in the failed jobs table. A value over a --max-* threshold is a WARNING,
over a --crit-* threshold CRITICAL. With no threshold flags the check is
--max-depth 10000 --max-wait 5m; a threshold not given is not checked, so
--max-failed 0 warns of any failed job and --crit-failed 0 makes one
critical.

On a backend that runs workflows, the check also recomputes the counts
that release waiting tasks; a stored count that differs (a broken
invariant: a task might never run) is CRITICAL whatever the thresholds.

Exit codes: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN. UNKNOWN is both a
backend that cannot be read within --timeout (down, unreachable, no jobq
schema) and a mistake in the command line: unlike the other commands,
whose usage errors exit 2, check never exits 2 unless a threshold is
crossed, so a typo cannot page anyone as critical. The line tells them
apart: "JOBQ UNKNOWN - usage: …" for the command line, "JOBQ UNKNOWN - "
and the backend's error otherwise. It never creates a store.`,
		Example: "  jobq check --max-depth 10000 --max-wait 5m --max-failed 0\n  jobq check --queues mail --crit-depth 50000 --crit-wait 30m",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return a.checkUnknown("usage: %s takes no arguments, got %q (see '%s --help')", cmd.CommandPath(), args[0], cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(cmd); err != nil {
				return a.checkUnknown("usage: %v", err)
			}
			if err := a.requireDurable(cmd, nil); err != nil {
				return a.checkUnknown("usage: %v", err)
			}
			ctx, cancel := context.WithTimeoutCause(cmd.Context(), f.timeout, fmt.Errorf("no answer within --timeout %s", f.timeout))
			defer cancel()
			var stats []jobq.QueueStats
			var drift []jobq.WorkflowDrift
			err := a.withBackend(ctx, existingOnly, func(b backend.Backend) error {
				in := jobq.NewInspector(b)
				var err error
				if stats, err = in.Stats(ctx); err != nil {
					return err
				}
				drift, err = in.WorkflowCheck(ctx)
				if errors.Is(err, jobq.ErrNoWorkflows) {
					return nil // nothing to check
				}
				return err
			})
			if err != nil {
				// Backends name the cause of a deadline that ended Open
				// themselves; other steps leave it to be named here.
				if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil && !strings.Contains(err.Error(), cause.Error()) {
					err = fmt.Errorf("%w: %w", cause, err)
				}
				return a.checkUnknown("%s", firstLine(a.redact(err).Error(), 500))
			}
			state, line := f.judge(stats, time.Now())
			state, line = judgeDrift(state, line, drift)
			fmt.Fprintln(a.out, "JOBQ "+checkStates[state]+" - "+line)
			return exitWith(state)
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return a.checkUnknown("usage: %v (see '%s --help')", err, c.CommandPath())
	})
	fl := cmd.Flags()
	fl.StringSliceVar(&f.queues, "queues", nil, "queues to check, comma-separated (default all that hold jobs)")
	for _, l := range []*limits{&f.warn, &f.crit} {
		state := strings.ToUpper(l.severity)
		fl.Int64Var(&l.depth, l.depthFlag, 0, "jobs due in a queue above which it is "+state)
		fl.DurationVar(&l.wait, l.waitFlag, 0, "how long a queue's oldest due job may wait before the queue is "+state)
		fl.Int64Var(&l.failed, l.failedFlag, 0, "failed jobs of a queue above which it is "+state)
	}
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "UNKNOWN when --db does not answer within this")
	return cmd
}

// exitWith is nil for OK, so cobra ends normally, and a checkExit
// otherwise.
func exitWith(state int) error {
	if state == checkOK {
		return nil
	}
	return checkExit{code: state}
}

// checkUnknown prints the UNKNOWN line and ends with its exit code.
func (a *app) checkUnknown(format string, args ...any) error {
	fmt.Fprintln(a.out, "JOBQ UNKNOWN - "+fmt.Sprintf(format, args...))
	return checkExit{code: checkUnknown}
}

// check reads which thresholds were given and refuses bad values.
func (f *checkFlags) check(cmd *cobra.Command) error {
	changed := cmd.Flags().Changed
	for _, q := range f.queues {
		if err := backend.ValidateQueue(q); err != nil {
			return fmt.Errorf("--queues: %w", err)
		}
	}
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout %s must be greater than zero", f.timeout)
	}
	for _, l := range []*limits{&f.warn, &f.crit} {
		l.hasDepth, l.hasWait, l.hasFailed = changed(l.depthFlag), changed(l.waitFlag), changed(l.failedFlag)
		switch {
		case l.depth < 0:
			return fmt.Errorf("--%s %d is negative", l.depthFlag, l.depth)
		case l.wait < 0:
			return fmt.Errorf("--%s %s is negative", l.waitFlag, l.wait)
		case l.failed < 0:
			return fmt.Errorf("--%s %d is negative", l.failedFlag, l.failed)
		}
	}
	w, c := f.warn, f.crit
	switch {
	case w.hasDepth && c.hasDepth && c.depth < w.depth:
		return fmt.Errorf("--crit-depth %d is below --max-depth %d", c.depth, w.depth)
	case w.hasWait && c.hasWait && c.wait < w.wait:
		return fmt.Errorf("--crit-wait %s is below --max-wait %s", c.wait, w.wait)
	case w.hasFailed && c.hasFailed && c.failed < w.failed:
		return fmt.Errorf("--crit-failed %d is below --max-failed %d", c.failed, w.failed)
	}
	if !w.hasDepth && !w.hasWait && !w.hasFailed && !c.hasDepth && !c.hasWait && !c.hasFailed {
		f.warn.depth, f.warn.hasDepth = 10000, true
		f.warn.wait, f.warn.hasWait = 5*time.Minute, true
	}
	return nil
}

// judge returns the worst state over the checked queues and the line
// that explains it, with the monitoring plugins' performance data (one
// value per queue and measure, with its thresholds).
func (f *checkFlags) judge(stats []jobq.QueueStats, now time.Time) (int, string) {
	if len(f.queues) > 0 {
		byName := map[string]jobq.QueueStats{}
		for _, s := range stats {
			byName[s.Queue] = s
		}
		stats = nil
		for _, q := range slices.Compact(slices.Sorted(slices.Values(f.queues))) {
			s := byName[q]
			s.Queue = q // a queue that holds no job is checked, and OK
			stats = append(stats, s)
		}
	}
	wait := func(s jobq.QueueStats) time.Duration {
		if s.OldestDue.IsZero() {
			return 0
		}
		return max(0, now.Sub(s.OldestDue)).Round(time.Second)
	}
	levels := []struct {
		lim   limits
		state int
	}{{f.crit, checkCritical}, {f.warn, checkWarning}}
	state := checkOK
	var problems, perf []string
	for _, s := range stats {
		w := wait(s)
		for _, m := range []struct {
			name, text, unit string
			value            float64
			limit            func(l limits) (float64, string, bool)
		}{
			{"depth", fmt.Sprintf("%d due", s.Pending), "", float64(s.Pending),
				func(l limits) (float64, string, bool) {
					return float64(l.depth), strconv.FormatInt(l.depth, 10), l.hasDepth
				}},
			{"wait", "oldest waiting " + w.String(), "s", w.Seconds(),
				func(l limits) (float64, string, bool) { return l.wait.Seconds(), l.wait.String(), l.hasWait }},
			{"failed", fmt.Sprintf("%d failed", s.Failed), "", float64(s.Failed),
				func(l limits) (float64, string, bool) {
					return float64(l.failed), strconv.FormatInt(l.failed, 10), l.hasFailed
				}},
		} {
			for _, lv := range levels {
				if limit, text, set := m.limit(lv.lim); set && m.value > limit {
					problems = append(problems, fmt.Sprintf("%s: %s (%s over %s)", s.Queue, m.text, lv.lim.severity, text))
					state = max(state, lv.state)
					break
				}
			}
			fields := []string{num(m.value) + m.unit, "", "", "0"}
			for i, l := range []limits{f.warn, f.crit} {
				if limit, _, set := m.limit(l); set {
					fields[1+i] = num(limit)
				}
			}
			perf = append(perf, fmt.Sprintf("'%s %s'=%s", s.Queue, m.name, strings.Join(fields, ";")))
		}
	}
	tot := jobq.Totals(stats)
	queues := "queues"
	if len(stats) == 1 {
		queues = "queue"
	}
	line := fmt.Sprintf("%d %s, %d due, oldest waiting %s, %d failed", len(stats), queues, tot.Pending, wait(tot), tot.Failed)
	if len(problems) > 0 {
		line = strings.Join(problems, "; ") + "; " + line
	}
	if len(perf) > 0 {
		line += " | " + strings.Join(perf, " ")
	}
	return state, line
}

// num formats a performance value without exponent or trailing zeros.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// maxDriftShown bounds the drifts named on check's one line.
const maxDriftShown = 3

// judgeDrift makes a workflow count that differs from its recomputation
// (Inspector.WorkflowCheck) CRITICAL, whatever the thresholds: a broken
// invariant of the store, not a load to wait out, and a task whose count
// is wrong may never be released. The line names the first drifts.
func judgeDrift(state int, line string, drift []jobq.WorkflowDrift) (int, string) {
	if len(drift) == 0 {
		return state, line
	}
	shown := make([]string, 0, maxDriftShown)
	for _, d := range drift[:min(len(drift), maxDriftShown)] {
		shown = append(shown, d.String())
	}
	text := "workflow counts drifted (critical): " + strings.Join(shown, "; ")
	if n := len(drift) - len(shown); n > 0 {
		text += fmt.Sprintf("; %d more", n)
	}
	return checkCritical, text + "; " + line
}
