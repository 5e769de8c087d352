package redis

import _ "embed"

// workflowsSource is the Lua of workflows (see its layout comment): the
// helpers that end and release tasks, which the scripts of scripts.lua
// that end jobs call, and the scripts of the Workflower methods. It is
// parsed with scriptsSource (see parsedScripts).
//
//go:embed workflows.lua
var workflowsSource string

// The workflow scripts (workflows.lua).
var (
	scriptWfInsert = mustScript("wfinsert")
	scriptWfCancel = mustScript("wfcancel")
	scriptWfGet    = mustScript("wfget")
	scriptWfList   = mustScript("wflist")
	scriptWfDeps   = mustScript("wfdeps")
	scriptWfStats  = mustScript("wfstats")
	scriptWfCheck  = mustScript("wfcheck")
	scriptWfPrune  = mustScript("wfprune")
)
