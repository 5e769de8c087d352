package redis

import (
	"strings"
	"testing"
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
}
