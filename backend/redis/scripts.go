package redis

import (
	"context"
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
// the helpers it uses in front, and is declared with the KEYS it takes,
// by name (see luaScript), in the order of its header.
var (
	scriptRegister = mustScript("register", "queues")
	scriptNow      = mustScript("now", "lastTS")
	scriptMint     = mustScript("mint", "lastTS")
	scriptInsert   = mustScript("insert", "lastTS", "ready", "readyAt", "readyAtCounts", "delayed", "jobPrefix",
		"inserted", "readyList", "base", "job...")
	scriptInsert1 = mustScript("insert1", "lastTS", "ready", "readyList", "jobPrefix", "inserted")
	// conflict.go
	scriptConflict = mustScript("conflict", "ready", "readyAt", "readyAtCounts", "delayed", "readyList", "readyOld",
		"job...")
	scriptPeek = mustScript("peek", "ready", "readyList", "readyAt", "delayed", "jobPrefix", "settings", "reserved",
		"base", "deadlines")
	scriptClaim = mustScript("claim", "ready", "readyList", "readyAt", "readyAtCounts", "delayed", "reserved",
		"jobPrefix", "settings", "base", "lastTS", "failed", "failedPrefix", "deadlines")
	scriptAdopt    = mustScript("adopt", "readyOld", "ready", "jobPrefix")
	scriptComplete = mustScript("complete", "lastTS", "ready", "readyAt", "delayed", "reserved", "failed",
		"failedPrefix", "completed", "completedAt", "cancelled", "cancelledAt", "cancelling", "finishedPrefix",
		"readyList", "base", "job...")
	scriptExtend   = mustScript("extend", "reserved", "job...")
	scriptProgress = mustScript("progress", "reserved", "job...")
	scriptRelease  = mustScript("release", "lastTS", "ready", "readyAt", "reserved", "failed", "failedPrefix",
		"cancelled", "cancelledAt", "cancelling", "finishedPrefix", "readyList", "base", "job...")
	scriptExpired = mustScript("expired", "reserved", "readyOld", "ready", "jobPrefix", "deadlines")
	scriptSweep   = mustScript("sweep", "lastTS", "ready", "readyAt", "reserved", "failed", "failedPrefix",
		"jobPrefix", "cancelled", "cancelledAt", "cancelling", "finishedPrefix", "readyList", "base", "readyAtCounts",
		"delayed", "deadlines")
	scriptStats = mustScript("stats", "ready", "readyList", "readyAt", "delayed", "reserved", "failed",
		"jobPrefix", "readyOld", "base")
	scriptFailedScan = mustScript("failedscan", "failed", "failedPrefix")
	scriptFailedOf   = mustScript("failedof", "failed", "failedPrefix", "failedByJob")
	scriptFailedIdx  = mustScript("failedindex", "failed", "failedPrefix", "failedByJob")
	scriptPurgeScan  = mustScript("purgescan", "failed", "failedPrefix", "base", "failedByJob")
	scriptPurge      = mustScript("purge", "failed", "base", "failedByJob", "failedJob...")
	scriptReplay     = mustScript("replay", "ready", "readyAt", "failed", "readyList", "base", "failedByJob",
		"failedJob...", "job...")
	scriptUReserve = mustScript("ureserve", "unique")
	scriptUSteal   = mustScript("usteal", "unique")
	scriptURelease = mustScript("urelease", "unique")
	scriptQCtl     = mustScript("qctl", "settings")
	// cancel.go, retention.go
	scriptCancel       = mustScript("cancel", cancelKeyNames...)
	scriptCancelling   = mustScript("cancelling", "cancelling", "jobPrefix")
	scriptFinishedScan = mustScript("finishedscan", "completed", "cancelled", "finishedPrefix")
	scriptJobList      = mustScript("joblist", "ready", "delayed", "reserved", "jobPrefix", "readyList", "readyOld",
		"base")
	scriptPruneFinished = mustScript("prunefinished", "completed", "completedAt", "cancelled", "cancelledAt",
		"finishedPrefix")
	scriptTurn     = mustScript("turn", "pruneTurn")
	scriptSchedule = mustScript("schedule", "schedules")
	scriptTick     = mustScript("tick", "lastTS", "ready", "readyAt", "readyAtCounts", "delayed", "jobPrefix",
		"ticks", "inserted", "readyList")
	scriptTickMove = mustScript("tickmove", "ticks")
	// keyrules.go
	scriptQKeys   = mustScript("qkeys", "settings", "base")
	scriptKeyList = mustScript("keylist", "base")
	scriptReKey   = mustScript("rekey", "base")
)

// cancelKeyNames are the KEYS of the script "cancel", and of "wfcancel",
// which cancels jobs with the same helper (cancel1 in scripts.lua).
var cancelKeyNames = []string{
	"ready", "readyAt", "readyAtCounts", "delayed", "failed", "cancelling", "cancelled", "cancelledAt",
	"jobPrefix", "finishedPrefix", "failedPrefix", "readyList", "readyOld", "base",
}

// allLuaScripts lists every script, for the tests of their declarations.
var allLuaScripts = []*luaScript{
	scriptRegister, scriptNow, scriptMint, scriptInsert, scriptInsert1, scriptConflict, scriptPeek, scriptClaim, scriptAdopt, scriptComplete,
	scriptExtend, scriptProgress, scriptRelease, scriptExpired, scriptSweep, scriptStats, scriptFailedScan, scriptFailedOf,
	scriptFailedIdx,
	scriptPurgeScan, scriptPurge, scriptReplay, scriptUReserve, scriptUSteal, scriptURelease,
	scriptQCtl,
	scriptCancel, scriptCancelling, scriptFinishedScan, scriptJobList, scriptPruneFinished, scriptPruneCompleted, scriptTurn,
	scriptSchedule, scriptTick, scriptTickMove, scriptQKeys, scriptKeyList, scriptReKey,
	// workflow_scripts.go
	scriptWfInsert, scriptWfCancel, scriptWfGet, scriptWfList, scriptWfDeps, scriptWfStats,
	scriptWfCheck, scriptWfPrune,
}

// allScripts lists every script, for loading them at open.
var allScripts = func() []*script {
	out := make([]*script, len(allLuaScripts))
	for i, s := range allLuaScripts {
		out[i] = s.script
	}
	return out
}()

// A luaScript is a script and the one declaration of the KEYS it takes:
// names (keys.go) that TestScriptKeys checks against the script's header,
// resolved at init so that a call's KEYS are built from the declaration
// at the cost of the slice alone (claims and completions build them on
// every call). A script takes the keys of one queue, or of the whole
// prefix; a queue's scripts may end with keys repeated per item (a job
// key per outcome, say), which the caller adds with itemKeys.
type luaScript struct {
	*script
	names []string // the KEYS before the items', in order
	each  []string // the names of the KEYS repeated per item, in order

	queue  []func(*queueKeys) string
	prefix []func(*keyspace) string
	item   []func(*queueKeys, int64) string
}

// keysOf returns the KEYS of a call of s on queue q, s taking no keys
// per item.
func (s *luaScript) keysOf(q *queueKeys) []string {
	if len(s.item) > 0 {
		panic(fmt.Sprintf("redis: script %s takes keys per item: build them with keysFor", s.name))
	}
	return s.keysFor(q, 0)
}

// keysFor returns the KEYS of a call of s on queue q before the items',
// with room for the keys of items items.
func (s *luaScript) keysFor(q *queueKeys, items int) []string {
	if s.queue == nil {
		panic(fmt.Sprintf("redis: script %s takes the prefix's keys, not a queue's", s.name))
	}
	keys := make([]string, len(s.queue), len(s.queue)+items*len(s.item))
	for i, key := range s.queue {
		keys[i] = key(q)
	}
	return keys
}

// itemKeys appends to keys those of one item: ids names the job or failed
// job of each key of the item, in the order of the declaration.
func (s *luaScript) itemKeys(keys []string, q *queueKeys, ids ...int64) []string {
	if len(ids) != len(s.item) {
		panic(fmt.Sprintf("redis: script %s takes %d keys per item, given %d IDs", s.name, len(s.item), len(ids)))
	}
	for i, key := range s.item {
		keys = append(keys, key(q, ids[i]))
	}
	return keys
}

// prefixKeys returns the KEYS of a call of s, a script on keys of the
// whole prefix.
func (s *luaScript) prefixKeys(ks *keyspace) []string {
	if s.prefix == nil {
		panic(fmt.Sprintf("redis: script %s takes a queue's keys, not the prefix's", s.name))
	}
	keys := make([]string, len(s.prefix))
	for i, key := range s.prefix {
		keys[i] = key(ks)
	}
	return keys
}

// on is a call of s on queue q, for evalAll.
func (s *luaScript) on(q *queueKeys, args []any) *evalCall {
	return &evalCall{s: s.script, keys: s.keysOf(q), args: args}
}

// call is a call of s on keys built by keysFor and itemKeys, for evalAll.
func (s *luaScript) call(keys []string, args []any) *evalCall {
	return &evalCall{s: s.script, keys: keys, args: args}
}

// eval runs s once on keys (see client.eval).
func (s *luaScript) eval(ctx context.Context, c *client, keys []string, args []any) (any, error) {
	return c.eval(ctx, s.script, keys, args)
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

// mustScript returns the named script with the helpers it uses in front,
// declared with the names of the KEYS it takes: those of keys.go's
// queueKeyNames, or else of its prefixKeyNames, then any of itemKeyNames
// written "name...", repeated per item. A missing script or an unknown
// or misplaced name is a programming error, caught by any test.
func mustScript(name string, keys ...string) *luaScript {
	body, ok := parsedScripts[name]
	if !ok {
		panic(fmt.Sprintf("redis: scripts.lua has no script %q", name))
	}
	s := &luaScript{script: newScript(name, withHelpers(body))}
	for _, k := range keys {
		if each, ok := strings.CutSuffix(k, "..."); ok {
			key, ok := itemKeyNames[each]
			if !ok || s.prefix != nil {
				panic(fmt.Sprintf("redis: script %s: no per-item key %q of a queue", name, each))
			}
			s.each, s.item = append(s.each, each), append(s.item, key)
			continue
		}
		if len(s.each) > 0 {
			panic(fmt.Sprintf("redis: script %s: key %q after the per-item keys", name, k))
		}
		if key, ok := queueKeyNames[k]; ok && s.prefix == nil {
			s.queue = append(s.queue, key)
		} else if key, ok := prefixKeyNames[k]; ok && s.queue == nil {
			s.prefix = append(s.prefix, key)
		} else {
			panic(fmt.Sprintf("redis: script %s: unknown key %q, or one of a queue and of the prefix both", name, k))
		}
		s.names = append(s.names, k)
	}
	if len(s.names) == 0 {
		panic(fmt.Sprintf("redis: script %s declares no keys: a cluster could not route it", name))
	}
	return s
}
