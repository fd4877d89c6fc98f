package node

import (
	"strconv"
	"strings"
)

// flagdPortFlag is one of flagd's port settings.
type flagdPortFlag struct {
	long, short string
	env         string // FLAGD_<FLAG>, which flagd reads when the flag is absent
	def         int32  // flagd's default; 0: none (an alias of another flag)
}

// flagdPortFlags are flagd v0.16's port flags (cmd/start.go), plus
// --metrics-port of older releases, rewritten where present.
var flagdPortFlags = []flagdPortFlag{
	{long: "port", short: "p", env: "FLAGD_PORT", def: 8013},
	{long: "management-port", short: "m", env: "FLAGD_MANAGEMENT_PORT", def: 8014},
	{long: "sync-port", short: "g", env: "FLAGD_SYNC_PORT", def: 8015},
	{long: "ofrep-port", short: "r", env: "FLAGD_OFREP_PORT", def: 8016},
	{long: "metrics-port", env: "FLAGD_METRICS_PORT"},
}

// rewriteFlagdArgs rewrites the port flags of a flagd command line with
// mapPort, and appends the ones it leaves at a default (the value of its
// FLAGD_* environment variable, else flagd's default) when the command is
// "start". env is the container's resolved environment.
func rewriteFlagdArgs(args []string, env map[string]string, mapPort func(int32) (int, error)) ([]string, error) {
	out := make([]string, 0, len(args)+8)
	seen := map[string]bool{}
	start := false
	rewrite := func(f flagdPortFlag, v string) (string, error) {
		seen[f.long] = true
		p, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return v, nil // not a number: flagd will say so itself
		}
		h, err := mapPort(int32(p))
		if err != nil {
			return "", err
		}
		return strconv.Itoa(h), nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		f, form, value := matchPortFlag(a)
		switch {
		case f == nil:
			if a == "start" {
				start = true
			}
			out = append(out, a)
		case form == formSeparate && i+1 < len(args):
			v, err := rewrite(*f, args[i+1])
			if err != nil {
				return nil, err
			}
			out = append(out, a, v)
			i++
		case form == formSeparate:
			out = append(out, a) // flag without value: flagd's error
		default:
			v, err := rewrite(*f, value)
			if err != nil {
				return nil, err
			}
			out = append(out, a[:len(a)-len(value)]+v)
		}
	}
	if !start {
		return out, nil
	}
	for _, f := range flagdPortFlags {
		if seen[f.long] || f.def == 0 {
			continue
		}
		port := f.def
		if v, ok := env[f.env]; ok {
			if p, err := strconv.ParseInt(v, 10, 32); err == nil {
				port = int32(p)
			}
		}
		h, err := mapPort(port)
		if err != nil {
			return nil, err
		}
		out = append(out, "--"+f.long+"="+strconv.Itoa(h))
	}
	return out, nil
}

type flagForm int

const (
	formSeparate flagForm = iota // "--port 8013", "-p 8013"
	formJoined                   // "--port=8013", "-p=8013", "-p8013"
)

// matchPortFlag recognises a flagd port flag in one argument.
func matchPortFlag(a string) (*flagdPortFlag, flagForm, string) {
	for i := range flagdPortFlags {
		f := &flagdPortFlags[i]
		long := "--" + f.long
		switch {
		case a == long:
			return f, formSeparate, ""
		case strings.HasPrefix(a, long+"="):
			return f, formJoined, a[len(long)+1:]
		}
		if f.short == "" {
			continue
		}
		short := "-" + f.short
		switch {
		case a == short:
			return f, formSeparate, ""
		case strings.HasPrefix(a, short+"="):
			return f, formJoined, a[len(short)+1:]
		case strings.HasPrefix(a, short) && len(a) > len(short) && isDigits(a[len(short):]):
			return f, formJoined, a[len(short):]
		}
	}
	return nil, 0, ""
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// rewriteEnvPorts rewrites the value of every variable whose name ends in
// _PORT and whose value is a port the pod declares.
func rewriteEnvPorts(env []envVar, declared func(int32) (int, bool)) {
	for i := range env {
		if !strings.HasSuffix(env[i].name, "_PORT") {
			continue
		}
		p, err := strconv.ParseInt(env[i].value, 10, 32)
		if err != nil {
			continue
		}
		if h, ok := declared(int32(p)); ok {
			env[i].value = strconv.Itoa(h)
		}
	}
}
