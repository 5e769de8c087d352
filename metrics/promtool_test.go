package metrics_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// promtool returns the path of Prometheus's promtool. Without it the test
// is skipped with the reason, except under CI=true, where .ci/run installs
// it and a missing one is a broken setup.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		const why = "promtool not found: it comes with Debian's prometheus package (apt-get install prometheus), which .ci/run installs"
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	return path
}

// runPromtool runs promtool with args in the package directory, stdin as
// its input, and fails the test with its output unless it succeeds.
func runPromtool(t *testing.T, stdin string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), promtool(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestAlertRules: the shipped rules are valid, and their unit tests (each
// alert fires when it should and stays quiet when it should not) pass.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	runPromtool(t, "", "check", "rules", "alerts.yml")
	runPromtool(t, "", "test", "rules", "alerts_test.yml")
}

// checkMetrics runs 'promtool check metrics' (the exposition format and
// the naming conventions: units, _total suffixes, help texts) on a scrape.
func checkMetrics(t *testing.T, scrape string) {
	t.Helper()
	runPromtool(t, scrape, "check", "metrics")
}
