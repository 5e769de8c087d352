package redis

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"
)

// scriptsSource is the Lua scripts of the backend, one file with a header
// per script (KEYS, ARGV, return value); those of workflows are in
// workflowsSource (workflow_scripts.go).
//
//go:embed scripts.lua
var scriptsSource string

// The scripts, parsed from scriptsSource at init; each is its body with
// the helpers it uses in front.
var (
	scriptRegister   = mustScript("register")
	scriptMint       = mustScript("mint")
	scriptInsert     = mustScript("insert")
	scriptInsert1    = mustScript("insert1")
	scriptPeek       = mustScript("peek")
	scriptClaim      = mustScript("claim")
	scriptAdopt      = mustScript("adopt")
	scriptComplete   = mustScript("complete")
	scriptExtend     = mustScript("extend")
	scriptRelease    = mustScript("release")
	scriptExpired    = mustScript("expired")
	scriptSweep      = mustScript("sweep")
	scriptStats      = mustScript("stats")
	scriptFailedScan = mustScript("failedscan")
	scriptPurgeScan  = mustScript("purgescan")
	scriptPurge      = mustScript("purge")
	scriptReplay     = mustScript("replay")
	scriptUReserve   = mustScript("ureserve")
	scriptUSteal     = mustScript("usteal")
	scriptURelease   = mustScript("urelease")
	scriptQCtl       = mustScript("qctl")
	// cancel.go, retention.go
	scriptCancel        = mustScript("cancel")
	scriptCancelling    = mustScript("cancelling")
	scriptFinishedScan  = mustScript("finishedscan")
	scriptJobList       = mustScript("joblist")
	scriptPruneFinished = mustScript("prunefinished")
	scriptTurn          = mustScript("turn")
	scriptSchedule      = mustScript("schedule")
	scriptTick          = mustScript("tick")
	scriptTickMove      = mustScript("tickmove")
)

// allScripts lists every script, for loading them at open.
var allScripts = []*script{
	scriptRegister, scriptMint, scriptInsert, scriptInsert1, scriptPeek, scriptClaim, scriptAdopt, scriptComplete,
	scriptExtend, scriptRelease, scriptExpired, scriptSweep, scriptStats, scriptFailedScan,
	scriptPurgeScan, scriptPurge, scriptReplay, scriptUReserve, scriptUSteal, scriptURelease,
	scriptQCtl,
	scriptCancel, scriptCancelling, scriptFinishedScan, scriptJobList, scriptPruneFinished, scriptTurn,
	scriptSchedule, scriptTick, scriptTickMove,
	// workflow_scripts.go
	scriptWfInsert, scriptWfCancel, scriptWfGet, scriptWfList, scriptWfDeps, scriptWfStats,
	scriptWfCheck, scriptWfPrune,
}

// helper is one "--- helper" block of scriptsSource and the names it
// defines.
type helper struct {
	src   string
	names []string
}

// parsedScripts maps each "--- script: NAME" section of scriptsSource and
// workflowsSource (workflow_scripts.go) to its body; parsedHelpers are the
// "--- helper" blocks, in order: those of workflowsSource last, so they
// may use the others, and any script may use them (the scripts that end
// jobs end workflow tasks).
var parsedScripts, parsedHelpers = parseScripts(scriptsSource, workflowsSource)

var (
	definedName = regexp.MustCompile(`(?m)^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)`)
	identifier  = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	// comment is a Lua line comment: the scripts have no block comments,
	// and no string of theirs holds "--".
	comment = regexp.MustCompile(`--[^\n]*`)
)

func parseScripts(srcs ...string) (map[string]string, []helper) {
	scripts := map[string]string{}
	var helpers []helper
	for _, src := range srcs {
		helpers = parseSource(src, scripts, helpers)
	}
	return scripts, helpers
}

// parseSource adds the scripts of one file to scripts and returns helpers
// with its helpers appended. Text before its first "--- " line is the
// file's comment, part of nothing.
func parseSource(src string, scripts map[string]string, helpers []helper) []helper {
	kind, name := "", ""
	var body strings.Builder
	end := func() {
		switch kind {
		case "script":
			scripts[name] = body.String()
		case "helper":
			h := helper{src: body.String()}
			for _, m := range definedName.FindAllStringSubmatch(h.src, -1) {
				h.names = append(h.names, m[1])
			}
			helpers = append(helpers, h)
		}
		body.Reset()
	}
	for _, line := range strings.SplitAfter(src, "\n") {
		if rest, ok := strings.CutPrefix(line, "--- "); ok {
			end()
			rest = strings.TrimSpace(rest)
			kind, name, _ = strings.Cut(rest, ":")
			name = strings.TrimSpace(name)
			continue
		}
		body.WriteString(line)
	}
	end()
	return helpers
}

// withHelpers returns body preceded by the helpers it uses, directly or
// through other helpers, in the order of scriptsSource.
func withHelpers(body string) string {
	used := map[string]bool{}
	// Words in comments are not uses: a helper a comment names ("ready",
	// "flush") would otherwise be defined, for nothing, on every call.
	for _, id := range identifier.FindAllString(comment.ReplaceAllString(body, ""), -1) {
		used[id] = true
	}
	include := make([]bool, len(parsedHelpers))
	for changed := true; changed; {
		changed = false
		for i, h := range parsedHelpers {
			if include[i] {
				continue
			}
			for _, n := range h.names {
				if used[n] {
					include[i], changed = true, true
					for _, id := range identifier.FindAllString(comment.ReplaceAllString(h.src, ""), -1) {
						used[id] = true
					}
					break
				}
			}
		}
	}
	var out strings.Builder
	for i, h := range parsedHelpers {
		if include[i] {
			out.WriteString(h.src)
		}
	}
	out.WriteString(body)
	return out.String()
}

// mustScript returns the named script with the helpers it uses in front;
// a missing one is a programming error, caught by any test.
func mustScript(name string) *script {
	body, ok := parsedScripts[name]
	if !ok {
		panic(fmt.Sprintf("redis: scripts.lua has no script %q", name))
	}
	return newScript(name, withHelpers(body))
}
