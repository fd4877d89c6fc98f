package node

import (
	"fmt"
	"io/fs"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
)

// Files as a container sees them: through its process's mount namespace,
// with every symlink (absolute ones included) resolved inside the
// container's root, never the host's. Tests read the projected files the
// way the process does, and a path such as /var/run/secrets/... cannot leak
// to the host's files of that name.

// ReadFile reads a file as the container's current process sees it.
func (n *Node) ReadFile(pod types.NamespacedName, container, path string) ([]byte, error) {
	pid, ok := n.PID(pod, container)
	if !ok {
		return nil, fmt.Errorf("container %s of pod %s is not running", container, pod)
	}
	return readInRoot(pid, path)
}

// Readlink reads a symlink as the container's current process sees it.
func (n *Node) Readlink(pod types.NamespacedName, container, path string) (string, error) {
	pid, ok := n.PID(pod, container)
	if !ok {
		return "", fmt.Errorf("container %s of pod %s is not running", container, pod)
	}
	return readlinkInRoot(pid, filepath.Dir(path), filepath.Base(path))
}

// Stat stats a file (following symlinks) as the container's current
// process sees it.
func (n *Node) Stat(pod types.NamespacedName, container, path string) (fs.FileInfo, error) {
	pid, ok := n.PID(pod, container)
	if !ok {
		return nil, fmt.Errorf("container %s of pod %s is not running", container, pod)
	}
	return statInRoot(pid, path)
}
