package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// addedByInjection is what a Pod has beyond the template it was created from:
// annotations, containers, init containers (flagd runs as a native sidecar)
// and volumes it adds, and env vars and mounts added to the template's
// containers.
func addedByInjection(tmplMeta metav1.ObjectMeta, tmpl corev1.PodSpec, p *corev1.Pod) map[string]any {
	out := map[string]any{}
	pod := p.Spec
	annotations := map[string]string{}
	for k, v := range p.Annotations {
		if _, ok := tmplMeta.Annotations[k]; !ok {
			annotations[k] = v
		}
	}
	if len(annotations) > 0 {
		out["annotations"] = annotations
	}
	if c := newContainers(tmpl.InitContainers, pod.InitContainers); len(c) > 0 {
		out["initContainers"] = c
	}
	if c := newContainers(tmpl.Containers, pod.Containers); len(c) > 0 {
		out["containers"] = c
	}
	var vols []corev1.Volume
	for _, v := range pod.Volumes {
		if !hasVolume(tmpl.Volumes, v.Name) && !strings.HasPrefix(v.Name, "kube-api-access-") {
			vols = append(vols, v)
		}
	}
	if len(vols) > 0 {
		out["volumes"] = vols
	}
	changed := map[string]any{}
	for _, c := range pod.Containers {
		var orig *corev1.Container
		for i := range tmpl.Containers {
			if tmpl.Containers[i].Name == c.Name {
				orig = &tmpl.Containers[i]
			}
		}
		if orig == nil {
			continue
		}
		var env []corev1.EnvVar
		for _, e := range c.Env {
			if !hasEnv(orig.Env, e.Name) {
				env = append(env, e)
			}
		}
		var mounts []corev1.VolumeMount
		for _, m := range c.VolumeMounts {
			if !hasMount(orig.VolumeMounts, m.MountPath) && !strings.HasPrefix(m.Name, "kube-api-access-") {
				mounts = append(mounts, m)
			}
		}
		added := map[string]any{}
		if len(env) > 0 {
			added["env"] = env
		}
		if len(mounts) > 0 {
			added["volumeMounts"] = mounts
		}
		if len(added) > 0 {
			changed[c.Name] = added
		}
	}
	if len(changed) > 0 {
		out["addedToContainers"] = changed
	}
	return out
}

func newContainers(tmpl, pod []corev1.Container) []corev1.Container {
	var out []corev1.Container
	for _, c := range pod {
		found := false
		for _, t := range tmpl {
			found = found || t.Name == c.Name
		}
		if !found {
			c.VolumeMounts = withoutServiceAccountMounts(c.VolumeMounts)
			out = append(out, c)
		}
	}
	return out
}

func withoutServiceAccountMounts(ms []corev1.VolumeMount) []corev1.VolumeMount {
	var out []corev1.VolumeMount
	for _, m := range ms {
		if !strings.HasPrefix(m.Name, "kube-api-access-") {
			out = append(out, m)
		}
	}
	return out
}

func hasVolume(vs []corev1.Volume, name string) bool {
	for _, v := range vs {
		if v.Name == name {
			return true
		}
	}
	return false
}

func hasEnv(es []corev1.EnvVar, name string) bool {
	for _, e := range es {
		if e.Name == name {
			return true
		}
	}
	return false
}

func hasMount(ms []corev1.VolumeMount, path string) bool {
	for _, m := range ms {
		if m.MountPath == path {
			return true
		}
	}
	return false
}

// defaultVariant reads a flag's defaultVariant from flagd JSON.
func defaultVariant(content, flag string) string {
	var doc struct {
		Flags map[string]struct {
			DefaultVariant string `json:"defaultVariant"`
		} `json:"flags"`
	}
	if json.Unmarshal([]byte(content), &doc) != nil {
		return ""
	}
	return doc.Flags[flag].DefaultVariant
}

func indentJSON(s, prefix string) string {
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(s), prefix, "  "); err != nil {
		return prefix + s
	}
	return prefix + b.String()
}

// prefixWriter indents each line written through it.
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		if _, err := fmt.Fprintln(p.w, p.prefix+s.Text()); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// findRoot finds the repository root: the folder of flagplane's go.mod at
// or above the working directory.
func findRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.Contains(b, []byte("module github.com/flagplane/flagplane\n")) {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("run the demo inside the flagplane repository (no flagplane go.mod at or above %s)", wd)
		}
	}
}

// relativeKubectl shortens the kubectl path for display when it is the
// repository's.
func relativeKubectl(root, path string) string {
	if rel, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}
