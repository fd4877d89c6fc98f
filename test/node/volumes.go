package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/flagplane/flagplane/test/node/atomicwriter"
	"github.com/flagplane/flagplane/test/node/internal/mountns"
)

// Volumes. Each volume of a pod is a directory under the pod's directory,
// bind-mounted into the containers at their volumeMounts:
//
//   - configMap, secret, downwardAPI and projected volumes are projected by
//     an atomic writer (the kubelet's "..data" layout) and re-projected on
//     every change of what they read: a ConfigMap or Secret (one watch per
//     object), the pod's labels and annotations, a token due for rotation;
//   - projected serviceAccountToken sources are requested through the
//     TokenRequest API with the pod's audience and expirationSeconds, bound
//     to the pod, and rotated at 80 % of their life;
//   - emptyDir is an empty directory (medium Memory too: no tmpfs);
//   - hostPath binds an existing host path.
//
// Other volume types (persistentVolumeClaim, csi, image, ...) keep the pod
// from starting, with a FailedMount event that says so.

// podVolume is one volume of a pod.
type podVolume struct {
	spec   corev1.Volume
	dir    string               // the host directory containers see
	writer *atomicwriter.Writer // nil unless projected by one
}

// podVolumes manages the volumes of one pod.
type podVolumes struct {
	dir     string
	objects *objectWatches
	tokens  *podTokens
	vols    map[string]*podVolume
	cancels []func()
}

// newPodVolumes creates the volume directories of pod and subscribes to
// what they read; changed is called when they need projecting again.
func newPodVolumes(dir string, pod *corev1.Pod, objects *objectWatches, tokens *podTokens, changed func()) (*podVolumes, error) {
	pv := &podVolumes{dir: dir, objects: objects, tokens: tokens, vols: map[string]*podVolume{}}
	for _, v := range pod.Spec.Volumes {
		vol := &podVolume{spec: v, dir: filepath.Join(dir, v.Name)}
		switch {
		case v.ConfigMap != nil, v.Secret != nil, v.DownwardAPI != nil, v.Projected != nil:
			w, err := atomicwriter.New(vol.dir)
			if err != nil {
				return nil, err
			}
			w.DirGID = fsGroupOf(pod)
			vol.writer = w
		case v.EmptyDir != nil:
			if err := os.MkdirAll(vol.dir, 0o777); err != nil {
				return nil, fmt.Errorf("creating emptyDir %s: %w", v.Name, err)
			}
			if err := os.Chmod(vol.dir, 0o777); err != nil {
				return nil, err
			}
		case v.HostPath != nil:
			vol.dir = v.HostPath.Path
		}
		pv.vols[v.Name] = vol
		for _, ref := range objectsOf(pod.Namespace, v) {
			pv.cancels = append(pv.cancels, objects.subscribe(ref, changed))
		}
	}
	return pv, nil
}

// objectsOf lists the ConfigMaps and Secrets a volume reads.
func objectsOf(ns string, v corev1.Volume) []objectRef {
	var refs []objectRef
	switch {
	case v.ConfigMap != nil:
		refs = append(refs, objectRef{"configmaps", ns, v.ConfigMap.Name})
	case v.Secret != nil:
		refs = append(refs, objectRef{"secrets", ns, v.Secret.SecretName})
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			switch {
			case s.ConfigMap != nil:
				refs = append(refs, objectRef{"configmaps", ns, s.ConfigMap.Name})
			case s.Secret != nil:
				refs = append(refs, objectRef{"secrets", ns, s.Secret.Name})
			}
		}
	}
	return refs
}

// project writes every projected volume of pod. It returns the errors of
// the volumes that cannot be projected yet (a missing ConfigMap, a cache
// not synced, a token refused); the others are written meanwhile.
func (pv *podVolumes) project(ctx context.Context, pod *corev1.Pod, node *nodeFacts) error {
	var errs []error
	for _, v := range pod.Spec.Volumes {
		vol := pv.vols[v.Name]
		if err := pv.projectOne(ctx, pod, vol, node); err != nil {
			errs = append(errs, fmt.Errorf("MountVolume.SetUp failed for volume %q: %w", v.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (pv *podVolumes) projectOne(ctx context.Context, pod *corev1.Pod, vol *podVolume, node *nodeFacts) error {
	v := vol.spec
	var payload atomicwriter.Payload
	var err error
	switch {
	case v.ConfigMap != nil:
		payload, err = pv.configMapPayload(pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, modeOf(v.ConfigMap.DefaultMode))
	case v.Secret != nil:
		payload, err = pv.secretPayload(pod.Namespace, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, modeOf(v.Secret.DefaultMode))
	case v.DownwardAPI != nil:
		payload, err = downwardPayload(pod, v.DownwardAPI.Items, modeOf(v.DownwardAPI.DefaultMode), node)
	case v.Projected != nil:
		payload, err = pv.projectedPayload(ctx, pod, v.Projected, node)
	case v.EmptyDir != nil:
		return nil
	case v.HostPath != nil:
		if _, err := os.Stat(v.HostPath.Path); err != nil {
			return fmt.Errorf("hostPath %s: %w (the node creates no host paths)", v.HostPath.Path, err)
		}
		return nil
	default:
		return fmt.Errorf("volume type not supported by the flagplane test node")
	}
	if err != nil {
		return err
	}
	applyFSGroup(payload, pod)
	_, err = vol.writer.Write(payload)
	return err
}

func (pv *podVolumes) configMapPayload(ns, name string, items []corev1.KeyToPath, optional *bool, mode fs.FileMode) (atomicwriter.Payload, error) {
	obj, exists, synced := pv.objects.get(objectRef{"configmaps", ns, name})
	if !synced {
		return nil, fmt.Errorf("waiting for the watch of configmap %q", name)
	}
	if !exists {
		if ptrTrue(optional) {
			return atomicwriter.Payload{}, nil
		}
		return nil, fmt.Errorf("configmap %q not found", name)
	}
	cm := obj.(*corev1.ConfigMap)
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keysPayload("configmap", name, data, items, optional, mode)
}

func (pv *podVolumes) secretPayload(ns, name string, items []corev1.KeyToPath, optional *bool, mode fs.FileMode) (atomicwriter.Payload, error) {
	obj, exists, synced := pv.objects.get(objectRef{"secrets", ns, name})
	if !synced {
		return nil, fmt.Errorf("waiting for the watch of secret %q", name)
	}
	if !exists {
		if ptrTrue(optional) {
			return atomicwriter.Payload{}, nil
		}
		return nil, fmt.Errorf("secret %q not found", name)
	}
	return keysPayload("secret", name, obj.(*corev1.Secret).Data, items, optional, mode)
}

// keysPayload projects the keys of a ConfigMap or Secret: all of them, or
// the listed items at their paths.
func keysPayload(kind, name string, data map[string][]byte, items []corev1.KeyToPath, optional *bool, mode fs.FileMode) (atomicwriter.Payload, error) {
	payload := atomicwriter.Payload{}
	if len(items) == 0 {
		for k, v := range data {
			payload[k] = atomicwriter.File{Data: v, Mode: mode}
		}
		return payload, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if ptrTrue(optional) {
				continue
			}
			return nil, fmt.Errorf("%s %q references non-existent key %q", kind, name, it.Key)
		}
		m := mode
		if it.Mode != nil {
			m = fs.FileMode(*it.Mode)
		}
		payload[it.Path] = atomicwriter.File{Data: v, Mode: m}
	}
	return payload, nil
}

func downwardPayload(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, mode fs.FileMode, node *nodeFacts) (atomicwriter.Payload, error) {
	payload := atomicwriter.Payload{}
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = podField(pod, it.FieldRef.FieldPath, node)
		case it.ResourceFieldRef != nil:
			c := findContainer(pod, it.ResourceFieldRef.ContainerName)
			if c == nil {
				return nil, fmt.Errorf("downward API item %s names no container %q", it.Path, it.ResourceFieldRef.ContainerName)
			}
			v, err = resourceField(pod, c, it.ResourceFieldRef, node)
		}
		if err != nil {
			return nil, fmt.Errorf("downward API item %s: %w", it.Path, err)
		}
		m := mode
		if it.Mode != nil {
			m = fs.FileMode(*it.Mode)
		}
		payload[it.Path] = atomicwriter.File{Data: []byte(v), Mode: m}
	}
	return payload, nil
}

func (pv *podVolumes) projectedPayload(ctx context.Context, pod *corev1.Pod, p *corev1.ProjectedVolumeSource, node *nodeFacts) (atomicwriter.Payload, error) {
	mode := modeOf(p.DefaultMode)
	payload := atomicwriter.Payload{}
	add := func(part atomicwriter.Payload, err error) error {
		if err != nil {
			return err
		}
		for k, f := range part {
			payload[k] = f
		}
		return nil
	}
	for _, s := range p.Sources {
		var err error
		switch {
		case s.ConfigMap != nil:
			err = add(pv.configMapPayload(pod.Namespace, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional, mode))
		case s.Secret != nil:
			err = add(pv.secretPayload(pod.Namespace, s.Secret.Name, s.Secret.Items, s.Secret.Optional, mode))
		case s.DownwardAPI != nil:
			err = add(downwardPayload(pod, s.DownwardAPI.Items, mode, node))
		case s.ServiceAccountToken != nil:
			err = add(pv.tokenPayload(ctx, pod, s.ServiceAccountToken, mode))
		default:
			err = errors.New("projected volume source not supported by the flagplane test node (clusterTrustBundle, podCertificate)")
		}
		if err != nil {
			return nil, err
		}
	}
	return payload, nil
}

// tokenPayload is a projected service-account token. As the kubelet does,
// it is readable by its owner only (and owned by the pod's user) when the
// pod's containers share one runAsUser or the pod has an fsGroup.
func (pv *podVolumes) tokenPayload(ctx context.Context, pod *corev1.Pod, s *corev1.ServiceAccountTokenProjection, mode fs.FileMode) (atomicwriter.Payload, error) {
	exp := int64(3600)
	if s.ExpirationSeconds != nil {
		exp = *s.ExpirationSeconds
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	value, err := pv.tokens.get(ctx, tokenKey{serviceAccount: sa, audience: s.Audience, expiration: exp})
	if err != nil {
		return nil, err
	}
	f := atomicwriter.File{Data: []byte(value), Mode: mode}
	fsUser, fsGroup := fsUserOf(pod), pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.FSGroup != nil
	if fsUser != nil || fsGroup {
		f.Mode = 0o600
	}
	if fsUser != nil {
		uid := int(*fsUser)
		f.UID = &uid
	}
	return atomicwriter.Payload{s.Path: f}, nil
}

// applyFSGroup gives the files of a volume to the pod's fsGroup, readable
// by the group, as the kubelet's volume ownership step does.
func applyFSGroup(payload atomicwriter.Payload, pod *corev1.Pod) {
	gid := fsGroupOf(pod)
	if gid == -1 {
		return
	}
	for k, f := range payload {
		f.GID = &gid
		if f.Mode == 0 {
			f.Mode = 0o644
		}
		f.Mode |= 0o040
		payload[k] = f
	}
}

func fsGroupOf(pod *corev1.Pod) int {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		return int(*sc.FSGroup)
	}
	return -1
}

func modeOf(m *int32) fs.FileMode {
	if m == nil {
		return 0o644
	}
	return fs.FileMode(*m)
}

// mountsFor returns the bind mounts of a container's volumeMounts.
func (pv *podVolumes) mountsFor(c *corev1.Container, env map[string]string) ([]mountns.Mount, error) {
	var out []mountns.Mount
	for _, m := range c.VolumeMounts {
		vol, ok := pv.vols[m.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %s: no volume of that name", m.Name)
		}
		src := vol.dir
		sub := m.SubPath
		if m.SubPathExpr != "" {
			sub = expand(m.SubPathExpr, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		}
		if sub != "" {
			if filepath.IsAbs(sub) || strings.HasPrefix(filepath.Clean(sub), "..") {
				return nil, fmt.Errorf("volumeMount %s: subPath %q leaves the volume", m.Name, sub)
			}
			// As with the kubelet, a subPath is resolved once, when the
			// container starts: it does not follow later ..data swaps.
			resolved, err := filepath.EvalSymlinks(filepath.Join(src, sub))
			if err != nil {
				if !os.IsNotExist(err) || vol.writer != nil {
					return nil, fmt.Errorf("volumeMount %s: subPath %s: %w", m.Name, sub, err)
				}
				resolved = filepath.Join(src, sub)
				if err := os.MkdirAll(resolved, 0o755); err != nil {
					return nil, err
				}
			}
			root, err := filepath.EvalSymlinks(vol.dir)
			if err != nil {
				return nil, err
			}
			if !strings.HasPrefix(resolved, root+string(filepath.Separator)) {
				return nil, fmt.Errorf("volumeMount %s: subPath %s resolves outside the volume", m.Name, sub)
			}
			src = resolved
		}
		out = append(out, mountns.Mount{Source: src, Target: m.MountPath, ReadOnly: m.ReadOnly})
	}
	return out, nil
}

// close stops the watches of the pod's volumes and its token rotation.
func (pv *podVolumes) close() {
	for _, c := range pv.cancels {
		c()
	}
	pv.tokens.close()
}

// projectLoop projects the pod's volumes whenever what they read changes,
// and retries every second while one cannot be projected.
func (r *podRunner) projectLoop(ctx context.Context) {
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.projectCh:
		case <-retry:
		}
		err := r.volumes.project(ctx, r.currentPod(), &r.n.facts)
		if ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		msg, old := "", r.volumeErr
		if err != nil {
			msg = err.Error()
		} else {
			r.mounted = true
		}
		r.volumeErr = msg
		r.mu.Unlock()
		r.changed()
		retry = nil
		if err != nil {
			if msg != old {
				r.n.event(r.podRef(), corev1.EventTypeWarning, "FailedMount", "%s", msg)
			}
			retry = time.After(time.Second)
		}
	}
}
