package redis

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jobq/jobq/backend"
)

// TestScriptHeaders: every script of scripts.lua says what it does, its
// KEYS, its ARGV (when it takes any) and its reply, and each carries only
// the helpers it uses.
func TestScriptHeaders(t *testing.T) {
	if len(parsedScripts) != len(allScripts) {
		t.Fatalf("scripts.lua has %d scripts, allScripts lists %d", len(parsedScripts), len(allScripts))
	}
	for _, s := range allScripts {
		body := parsedScripts[s.name]
		var header []string
		for _, line := range strings.Split(body, "\n") {
			if !strings.HasPrefix(line, "--") {
				break
			}
			header = append(header, line)
		}
		h := strings.Join(header, "\n")
		if len(header) < 3 || !strings.Contains(h, "KEYS[1]") || !strings.Contains(h, "Returns") {
			t.Errorf("script %s: header %q lacks KEYS or Returns", s.name, h)
		}
		if strings.Contains(body, "ARGV") && !strings.Contains(h, "ARGV") {
			t.Errorf("script %s uses ARGV but its header does not say what it holds", s.name)
		}
	}
	// The lease extension needs no clock arithmetic beyond now_us, no
	// minting and no failed-job helpers.
	for _, unused := range []string{"local function minter", "local function scan", "local function to_failed"} {
		if strings.Contains(scriptExtend.src, unused) {
			t.Errorf("script extend carries %q", unused)
		}
	}
	if !strings.Contains(scriptExtend.src, "local function now_us") {
		t.Error("script extend lacks the helper now_us it calls")
	}
}

// TestScriptHelpers: a script gets the helpers its code uses, directly or
// through another helper, and not those its comments only name: each one
// defined costs every call its closure.
func TestScriptHelpers(t *testing.T) {
	defines := func(src, name string) bool { return strings.Contains(src, "local function "+name+"(") }
	// insert1 writes reserve out and makes no closure at all, though its
	// comments name "reserve" and "insert".
	if strings.Contains(scriptInsert1.src, "local function") {
		t.Error("insert1 defines a helper function, which costs every single enqueue its closure")
	}
	if !strings.Contains(scriptInsert1.src, "local EPOCH_US =") {
		t.Error("insert1 lacks EPOCH_US, which its code uses")
	}

	// claim uses pick, unready and zadd (through its own code).
	for _, name := range []string{"pick", "unready", "zadd", "promote"} {
		if !defines(scriptClaim.src, name) {
			t.Errorf("claim lacks helper %s, which its code uses", name)
		}
	}
	// Layout 4's ready set is adopted at Migrate and by lease sweeps: the
	// claim path never looks at it.
	for _, s := range []*luaScript{scriptClaim, scriptPeek} {
		if defines(s.src, "adopt") || slices.Contains(s.names, "readyOld") {
			t.Errorf("%s adopts layout 4's ready set, on every claim", s.name)
		}
	}
	if !defines(scriptExpired.src, "adopt") {
		t.Error("expired (every lease sweep) does not adopt layout 4's ready set")
	}
}

// TestScriptKeys: each script's header names the KEYS that its
// declaration (scripts.go) builds, by the same names, in the same order
// and as many, with the keys repeated per item last; its body reads no
// KEYS element beyond them by number. So a header and a call cannot
// disagree: a call's KEYS come from the declaration alone.
func TestScriptKeys(t *testing.T) {
	for _, s := range allLuaScripts {
		names, each, err := headerKeys(parsedScripts[s.name])
		if err != nil {
			t.Errorf("script %s: %v", s.name, err)
			continue
		}
		if !slices.Equal(names, s.names) || !slices.Equal(each, s.each) {
			t.Errorf("script %s: header KEYS %v then per item %v; declared %v then per item %v", s.name, names, each, s.names, s.each)
		}
		body := comment.ReplaceAllString(parsedScripts[s.name], "")
		for _, m := range keysIndex.FindAllStringSubmatch(body, -1) {
			if i, _ := strconv.Atoi(m[1]); i > len(s.names) {
				t.Errorf("script %s reads KEYS[%d] but is declared with %d keys before the items'", s.name, i, len(s.names))
			}
		}
	}
}

// TestHeaderKeys: what the parser of headers refuses.
func TestHeaderKeys(t *testing.T) {
	for _, bad := range []string{
		"-- Does.\n-- Returns 1.\n",                               // no KEYS
		"-- KEYS[1] ready  KEYS[3] delayed\n",                     // a gap
		"-- KEYS[1] ready  KEYS[2..] job...  KEYS[3] delayed\n",   // items not last
		"-- KEYS[1] ready  KEYS[2..] the jobs\n",                  // items unnamed
		"-- KEYS[1] P:ready\n",                                    // not a name
		"-- KEYS[1] ready\n-- KEYS[2] delayed\n",                  // two sections
		"-- KEYS[1] ready\n--   KEYS[2] delayed\n-- KEYS[3] rr\n", // two sections
	} {
		if names, each, err := headerKeys(bad); err == nil {
			t.Errorf("header %q parsed as %v, %v", bad, names, each)
		}
	}
	names, each, err := headerKeys("-- Does.\n-- KEYS[1] ready (ZSET)  KEYS[2] base\n--   (workflows.lua)  KEYS[3..] failedJob... job... per item\n-- ARGV[1] x\nreturn 1\n")
	if err != nil || !slices.Equal(names, []string{"ready", "base"}) || !slices.Equal(each, []string{"failedJob", "job"}) {
		t.Errorf("headerKeys = %v, %v, %v", names, each, err)
	}
}

var (
	keysEntry = regexp.MustCompile(`KEYS\[(\d+)(\.\.)?\]`)
	keysName  = regexp.MustCompile(`^\s+([a-z][A-Za-z]*)(?:\s|$)`)
	keysEach  = regexp.MustCompile(`\b([a-z][A-Za-z]*)\.\.\.`)
	keysIndex = regexp.MustCompile(`KEYS\[(\d+)\]`)
)

// headerKeys reads the KEYS of a script's header: the one line starting
// "-- KEYS" and the lines indented under it ("--   "), holding "KEYS[i]
// name" for each key in order, and last, when the script takes keys per
// item, "KEYS[i..] name... name..." (text between entries is comment).
func headerKeys(body string) (names, each []string, err error) {
	var section []string
	in, seen := false, false
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "--") {
			break
		}
		switch {
		case strings.HasPrefix(line, "-- KEYS"):
			if seen {
				return nil, nil, fmt.Errorf("two KEYS sections")
			}
			in, seen = true, true
		case in && strings.HasPrefix(line, "--   "):
		default:
			in = false
		}
		if in {
			section = append(section, strings.TrimPrefix(line, "--"))
		}
	}
	if !seen {
		return nil, nil, fmt.Errorf("no KEYS line")
	}
	text := strings.Join(section, " ")
	entries := keysEntry.FindAllStringSubmatchIndex(text, -1)
	for k, e := range entries {
		i, _ := strconv.Atoi(text[e[2]:e[3]])
		if i != len(names)+1 || len(each) > 0 {
			return nil, nil, fmt.Errorf("KEYS[%d] after %d keys and %d per item", i, len(names), len(each))
		}
		end := len(text)
		if k+1 < len(entries) {
			end = entries[k+1][0]
		}
		rest := text[e[1]:end]
		if e[4] >= 0 { // KEYS[i..]
			for _, m := range keysEach.FindAllStringSubmatch(rest, -1) {
				each = append(each, m[1])
			}
			if len(each) == 0 {
				return nil, nil, fmt.Errorf("KEYS[%d..] names no key (name...)", i)
			}
			continue
		}
		m := keysName.FindStringSubmatch(rest)
		if m == nil {
			return nil, nil, fmt.Errorf("KEYS[%d] is not followed by a key's name", i)
		}
		names = append(names, m[1])
	}
	return names, each, nil
}

// TestMaxErrMatches: the error log add_error keeps is as long as the
// contract's bound; the script cannot read the Go constant.
func TestMaxErrMatches(t *testing.T) {
	want := "local MAXERR = " + strconv.Itoa(backend.MaxAttemptErrors) + " "
	if !strings.Contains(scriptsSource, want) {
		t.Fatalf("scripts.lua does not define %q", want)
	}
}
