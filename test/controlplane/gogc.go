package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ProcessGOGC is the garbage collector's target (GOGC) of the control
// plane's processes unless Options.GOGC says otherwise: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler. At Go's
// default, 100, a CPU profile of kube-apiserver under test/counts, which
// writes large objects, had about a quarter of it in garbage collection;
// at 400 the collector runs about a quarter as often, for more memory
// (BenchmarkAPIServerGOGC measures both; docs/development.md has the
// figures). The suites share the machine's cores; the API served is the
// same.
const ProcessGOGC = "400"

// processEnv is the environment of a control-plane process: this
// process's, with GOGC set to gogc.
func processEnv(gogc string) []string {
	return append(os.Environ(), "GOGC="+gogc)
}

// withGOGC writes into dir a script that runs binary with GOGC set to
// gogc, and returns its path: envtest starts etcd and kube-apiserver with
// this process's environment, and takes a path to run. The script
// replaces itself with binary (exec), so the process keeps the pid
// envtest stops it by and the command line the watchdog finds it by.
func withGOGC(dir, binary, gogc string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	script := filepath.Join(dir, filepath.Base(binary))
	body := "#!/bin/sh\nGOGC=" + shellQuote(gogc) + " exec " + shellQuote(binary) + " \"$@\"\n"
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		return "", fmt.Errorf("writing the script that starts %s: %w", binary, err)
	}
	return script, nil
}

// shellQuote quotes s as one word of /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
