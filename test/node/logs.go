package node

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Container logs: one file per run of a container, under
// <Dir>/logs/<namespace>_<pod>_<uid>/<container>/<run>.log, stdout and
// stderr as the process wrote them (no CRI log framing).

// Logs returns everything the container of a running pod wrote to stdout
// and stderr, every run of it in order. LogsOf also covers deleted pods.
func (n *Node) Logs(pod types.NamespacedName, container string) (string, error) {
	r := n.runner(pod)
	if r == nil {
		return "", fmt.Errorf("pod %s does not run on node %s", pod, n.opts.Name)
	}
	return readLogs(filepath.Join(r.logDir, container))
}

// LogsOf returns the logs of every container of every pod of namespace
// that ran on the node, deleted pods included, headed by pod and
// container: what a failed spec should show.
func (n *Node) LogsOf(namespace string) string {
	root := filepath.Join(n.dir, "logs")
	pods, _ := os.ReadDir(root) // sorted by name
	var b strings.Builder
	for _, p := range pods {
		if !strings.HasPrefix(p.Name(), namespace+"_") {
			continue
		}
		containers, _ := os.ReadDir(filepath.Join(root, p.Name()))
		for _, c := range containers {
			logs, err := readLogs(filepath.Join(root, p.Name(), c.Name()))
			if err != nil {
				logs = err.Error()
			}
			fmt.Fprintf(&b, "==> %s / %s <==\n%s\n", p.Name(), c.Name(), logs)
		}
	}
	return b.String()
}

func readLogs(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("no logs: %w", err)
	}
	runs := make([]int, 0, len(entries))
	for _, e := range entries {
		if i, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".log")); err == nil {
			runs = append(runs, i)
		}
	}
	slices.Sort(runs)
	var b strings.Builder
	for _, i := range runs {
		data, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i)+".log"))
		if err != nil {
			return "", err
		}
		if len(runs) > 1 {
			fmt.Fprintf(&b, "--- run %d ---\n", i)
		}
		b.Write(data)
	}
	return b.String(), nil
}
