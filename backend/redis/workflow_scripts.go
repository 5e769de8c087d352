package redis

import _ "embed"

// workflowsSource is the Lua of workflows (see its layout comment): the
// helpers that end and release tasks, which the scripts of scripts.lua
// that end jobs call, and the scripts of the Workflower methods. It is
// parsed with scriptsSource (see parsedScripts).
//
//go:embed workflows.lua
var workflowsSource string

// The workflow scripts (workflows.lua), declared as those of scripts.go.
// Each takes the queue's key prefix (base), from which it builds the
// workflow keys; wfcancel cancels jobs as the script "cancel" does.
var (
	scriptWfInsert = mustScript("wfinsert", "base")
	scriptWfCancel = mustScript("wfcancel", cancelKeyNames...)
	scriptWfGet    = mustScript("wfget", "base")
	scriptWfList   = mustScript("wflist", "base")
	scriptWfDeps   = mustScript("wfdeps", "base")
	scriptWfStats  = mustScript("wfstats", "base")
	scriptWfCheck  = mustScript("wfcheck", "base")
	scriptWfPrune  = mustScript("wfprune", "base")
)
