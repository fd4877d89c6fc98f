package node

import (
	corev1 "k8s.io/api/core/v1"
)

// Security context. The node honours what decides who a process is and
// what it may write: runAsUser, runAsGroup, supplementalGroups and fsGroup
// (as the process's identity, and as the owner of projected files), and
// readOnlyRootFilesystem (/ is remounted read-only in the container's
// mount namespace). runAsNonRoot is checked as the kubelet checks it.
// Capabilities, seccomp, AppArmor, SELinux and privilege escalation are
// not enforced: there is no container runtime to enforce them.

// identity is who a container's process runs as.
type identity struct {
	uid, gid *int
	groups   []int
}

// containerIdentity resolves the effective identity of a container from
// its own and the pod's security context.
func containerIdentity(pod *corev1.Pod, c *corev1.Container) (identity, error) {
	var id identity
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	csc := c.SecurityContext
	if csc == nil {
		csc = &corev1.SecurityContext{}
	}
	uid := firstInt64(csc.RunAsUser, psc.RunAsUser)
	gid := firstInt64(csc.RunAsGroup, psc.RunAsGroup)
	nonRoot := csc.RunAsNonRoot
	if nonRoot == nil {
		nonRoot = psc.RunAsNonRoot
	}
	if ptrTrue(nonRoot) {
		// The kubelet checks the image's user when runAsUser is unset; the
		// binaries here have no image user, so they would run as root.
		if uid == nil {
			return id, configErrorf("container has runAsNonRoot and image will run as root (the flagplane test node runs binaries without an image user; set runAsUser)")
		}
		if *uid == 0 {
			return id, configErrorf("container's runAsUser breaks non-root policy")
		}
	}
	if uid != nil {
		u := int(*uid)
		id.uid = &u
		if gid == nil {
			// A runtime uses the image's group; there is none: the group
			// of the same number is the usual convention.
			g := u
			id.gid = &g
		}
	}
	if gid != nil {
		g := int(*gid)
		id.gid = &g
	}
	for _, g := range psc.SupplementalGroups {
		id.groups = append(id.groups, int(g))
	}
	if psc.FSGroup != nil {
		id.groups = append(id.groups, int(*psc.FSGroup))
	}
	return id, nil
}

func readOnlyRoot(c *corev1.Container) bool {
	return c.SecurityContext != nil && ptrTrue(c.SecurityContext.ReadOnlyRootFilesystem)
}

// fsUserOf is the user that owns projected service-account tokens: the
// runAsUser that every container of the pod shares, if they all set one
// (directly or through the pod).
func fsUserOf(pod *corev1.Pod) *int64 {
	var user *int64
	for _, c := range allContainers(pod) {
		var own *int64
		if c.SecurityContext != nil {
			own = c.SecurityContext.RunAsUser
		}
		var podUser *int64
		if pod.Spec.SecurityContext != nil {
			podUser = pod.Spec.SecurityContext.RunAsUser
		}
		u := firstInt64(own, podUser)
		if u == nil {
			return nil
		}
		if user != nil && *user != *u {
			return nil
		}
		user = u
	}
	return user
}

func firstInt64(vals ...*int64) *int64 {
	for _, v := range vals {
		if v != nil {
			return v
		}
	}
	return nil
}
