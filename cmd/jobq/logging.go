package main

import (
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
)

// logFlags are the log options of the long-running commands (worker,
// metrics).
type logFlags struct {
	format, level string
	json          bool // --json-logs, the older spelling of --log-format json
}

func (f *logFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.format, "log-format", "text", "log lines as text (key=value) or json")
	fl.StringVar(&f.level, "log-level", "info", "least level logged: debug (every job's outcome), info, warn (retries and problems) or error")
	fl.BoolVar(&f.json, "json-logs", false, "log JSON lines")
	_ = fl.MarkDeprecated("json-logs", "use --log-format json")
}

// logger returns the logger the flags ask for, writing to a's error
// output (which scrubs the --db URL's secrets from every line).
func (a *app) logger(cmd *cobra.Command, f logFlags) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.level)); err != nil || strings.ContainsAny(f.level, "+-") {
		return nil, usagef("--log-level %q: use debug, info, warn or error", f.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	format := f.format
	if f.json {
		if cmd.Flags().Changed("log-format") && format != "json" {
			return nil, usagef("--json-logs contradicts --log-format %s", format)
		}
		format = "json"
	}
	switch format {
	case "text":
		a.storeLog = slog.New(slog.NewTextHandler(a.errOut, opts))
	case "json":
		a.storeLog = slog.New(slog.NewJSONHandler(a.errOut, opts))
	default:
		return nil, usagef("--log-format %q: use text or json", f.format)
	}
	return a.storeLog, nil
}
