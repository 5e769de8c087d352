package jobq_test

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The Go snippets of the README and the guides are documentation that must
// keep compiling as the API changes. Every ```go block of README.md and
// docs/*.md is a complete Go file (package clause and imports): a program,
// a package of its own, or a test file (package x_test, func TestX).
// TestSnippetsCompile writes each into a directory of its own inside the
// module, under a temporary directory whose name starts with "_" (so that
// ./... never sees it), and runs go vet on all of them at once with the
// module's go.mod, offline. A failure names the Markdown file and line. A
// block must also be gofmt-formatted, as the code it documents is.

// snippet is one ```go block of a Markdown file.
type snippet struct {
	file string // the Markdown file, slash-separated, relative to the module root
	line int    // the line of the block's first line of code
	code string
}

func (s snippet) String() string { return fmt.Sprintf("%s:%d", s.file, s.line) }

// snippetMarkdown lists the Markdown files whose Go blocks are checked.
func snippetMarkdown(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(docs)
	return append([]string{"README.md"}, docs...)
}

// extractGoSnippets returns the ```go (or ```golang) blocks of a Markdown
// text. A block may be indented (inside a list item): that indentation is
// removed from its lines. A fence closes only with at least as many
// backticks as opened it, so a block may show a shorter fence. An
// unterminated block is an error.
func extractGoSnippets(file, text string) ([]snippet, error) {
	var (
		out    []snippet
		open   bool
		isGo   bool
		fence  string
		indent string
		start  int
		code   strings.Builder
	)
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i, l := range lines {
		trimmed := strings.TrimLeft(l, " \t")
		if !open {
			n := len(trimmed) - len(strings.TrimLeft(trimmed, "`"))
			if n < 3 {
				continue
			}
			info := strings.Fields(trimmed[n:])
			open, fence, indent, start = true, trimmed[:n], l[:len(l)-len(trimmed)], i+2
			isGo = len(info) > 0 && (info[0] == "go" || info[0] == "golang")
			code.Reset()
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.TrimRight(strings.TrimSpace(trimmed), "`") == "" {
			open = false
			if isGo {
				out = append(out, snippet{file: file, line: start, code: code.String()})
			}
			continue
		}
		if isGo {
			code.WriteString(strings.TrimPrefix(l, indent))
			code.WriteByte('\n')
		}
	}
	if open {
		return out, fmt.Errorf("%s:%d: code block not closed", file, start-1)
	}
	return out, nil
}

// isTestFile reports whether a snippet must be named *_test.go: its package
// is an external test package, or it declares a test, benchmark, fuzz test
// or example function.
func isTestFile(f *ast.File) bool {
	if strings.HasSuffix(f.Name.Name, "_test") {
		return true
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil {
			continue
		}
		for _, prefix := range []string{"Test", "Benchmark", "Fuzz", "Example"} {
			if rest, ok := strings.CutPrefix(fn.Name.Name, prefix); ok {
				if r, _ := utf8.DecodeRuneInString(rest); rest == "" || !unicode.IsLower(r) {
					return true
				}
			}
		}
	}
	return false
}

// goTool finds the go command of the toolchain running the tests.
func goTool(t *testing.T) string {
	t.Helper()
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no go command to type-check the snippets with: %v", err)
		}
		t.Skipf("no go command to type-check the snippets with: %v", err)
	}
	return p
}

func TestSnippetExtract(t *testing.T) {
	md := "text\n```go\npackage a\n```\n\n```sh\ngo test\n```\n" +
		"- item\n\n  ```go\n  package b\n\n  func f() {}\n  ```\n" +
		"````go\npackage c\n```\n````\n"
	got, err := extractGoSnippets("x.md", md)
	if err != nil {
		t.Fatal(err)
	}
	want := []snippet{
		{"x.md", 3, "package a\n"},
		{"x.md", 12, "package b\n\nfunc f() {}\n"},
		{"x.md", 17, "package c\n```\n"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("extracted %q, want %q", got, want)
	}
	if _, err := extractGoSnippets("y.md", "```go\npackage a\n"); err == nil || !strings.Contains(err.Error(), "y.md:1:") {
		t.Errorf("an unterminated block gave %v, want an error at y.md:1", err)
	}

	fset := token.NewFileSet()
	for src, want := range map[string]bool{
		"package x_test\n": true,
		"package x\nimport \"testing\"\nfunc TestA(t *testing.T) {}": true,
		"package x\nfunc Test(t int) {}":                             true,
		"package x\nfunc Testify() {}":                               false,
		"package main\nfunc main() {}":                               false,
	} {
		f, err := parser.ParseFile(fset, "s.go", src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := isTestFile(f); got != want {
			t.Errorf("isTestFile(%q) = %v, want %v", src, got, want)
		}
	}
}

func TestSnippetsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: type-checking the Go snippets of README.md and docs/ runs go vet")
	}
	var snippets []snippet
	for _, file := range snippetMarkdown(t) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		ss, err := extractGoSnippets(filepath.ToSlash(file), string(text))
		if err != nil {
			t.Error(err)
		}
		snippets = append(snippets, ss...)
	}
	if !slices.ContainsFunc(snippets, func(s snippet) bool { return s.file == "README.md" }) {
		t.Fatal("README.md has no ```go block: the first program is missing")
	}
	goCmd := goTool(t)

	// Inside the module, so the snippets build against it and its go.mod;
	// "_" keeps ./... (go vet, go test, staticcheck) away from it.
	dir, err := os.MkdirTemp(".", "_snippets")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	fset := token.NewFileSet()
	var pkgs []string
	for i, s := range snippets {
		f, err := parser.ParseFile(fset, "", s.code, parser.SkipObjectResolution)
		if err != nil {
			var list scanner.ErrorList
			if errors.As(err, &list) && len(list) > 0 {
				t.Errorf("%s:%d: not a complete Go file (block at %s): %s", s.file, s.line+list[0].Pos.Line-1, s, list[0].Msg)
			} else {
				t.Errorf("%s: not a complete Go file: %v", s, err)
			}
			continue
		}
		if formatted, err := format.Source([]byte(s.code)); err == nil && string(formatted) != s.code {
			t.Errorf("%s: Go block not gofmt-formatted (run gofmt on it)", s)
		}
		name := "snippet.go"
		if isTestFile(f) {
			name = "snippet_test.go"
		}
		sub := filepath.Join(dir, fmt.Sprintf("s%03d", i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, name), []byte(s.code), 0o644); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, "./"+filepath.ToSlash(sub))
	}
	if len(pkgs) == 0 {
		return
	}

	cmd := exec.Command(goCmd, append([]string{"vet", "-mod=readonly"}, pkgs...)...)
	// With this module's go.mod alone: no workspace, no toolchain download.
	// The proxy stays as configured: a snippet may import a package whose
	// module this test binary did not need, so it may not be cached yet.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Logf("%d Go snippets type-check and pass go vet", len(pkgs))
		return
	}
	// go vet names each problem's file as dir/sNNN/snippet[_test].go:LINE:COL.
	re := regexp.MustCompile(regexp.QuoteMeta(filepath.Base(dir)) + `[/\\]s(\d+)[/\\]snippet(?:_test)?\.go:(\d+)(?::\d+)?:\s*(.*)`)
	found := false
	for _, l := range bytes.Split(out, []byte("\n")) {
		m := re.FindSubmatch(l)
		if m == nil {
			continue
		}
		i, _ := strconv.Atoi(string(m[1]))
		line, _ := strconv.Atoi(string(m[2]))
		if i >= len(snippets) {
			continue
		}
		s := snippets[i]
		found = true
		t.Errorf("%s:%d: %s (Go block at %s)", s.file, s.line+line-1, m[3], s)
	}
	if !found {
		t.Errorf("go vet on the snippets failed: %v\n%s", err, out)
	}
}
