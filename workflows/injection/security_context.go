package injection

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// HardenedSecurityContext is the sidecar's securityContext unless a source
// relaxes it: flagd needs no privilege, no capability, no writable root
// filesystem, and runs as the non-root user of its image.
func HardenedSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To[int64](65532),
		RunAsGroup:               ptr.To[int64](65532),
		AllowPrivilegeEscalation: ptr.To(false),
		Privileged:               ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// ParseSecurityContextOverride reads the AnnotationSidecarSecurityContext of a source.
func ParseSecurityContextOverride(value string) (*corev1.SecurityContext, error) {
	dec := json.NewDecoder(strings.NewReader(value))
	dec.DisallowUnknownFields()
	sc := &corev1.SecurityContext{}
	if err := dec.Decode(sc); err != nil {
		return nil, fmt.Errorf("annotation %s must be a JSON securityContext: %w", AnnotationSidecarSecurityContext, err)
	}
	return sc, nil
}

func (m *sidecarMerge) securityContextFor() *corev1.SecurityContext {
	sc := HardenedSecurityContext()
	if !m.securityContext.set {
		return sc
	}
	override, err := ParseSecurityContextOverride(m.securityContext.value)
	if err != nil {
		m.inj.Warnings = append(m.inj.Warnings, fmt.Sprintf("%s: %v; the hardened securityContext applies", keyString(m.securityContext.from), err))
		return sc
	}
	// Fields the override sets replace the hardened ones.
	if override.RunAsNonRoot != nil {
		sc.RunAsNonRoot = override.RunAsNonRoot
	}
	if override.RunAsUser != nil {
		sc.RunAsUser = override.RunAsUser
	}
	if override.RunAsGroup != nil {
		sc.RunAsGroup = override.RunAsGroup
	}
	if override.AllowPrivilegeEscalation != nil {
		sc.AllowPrivilegeEscalation = override.AllowPrivilegeEscalation
	}
	if override.Privileged != nil {
		sc.Privileged = override.Privileged
	}
	if override.ReadOnlyRootFilesystem != nil {
		sc.ReadOnlyRootFilesystem = override.ReadOnlyRootFilesystem
	}
	if override.Capabilities != nil {
		sc.Capabilities = override.Capabilities
	}
	if override.SeccompProfile != nil {
		sc.SeccompProfile = override.SeccompProfile
	}
	if override.SELinuxOptions != nil {
		sc.SELinuxOptions = override.SELinuxOptions
	}
	if override.AppArmorProfile != nil {
		sc.AppArmorProfile = override.AppArmorProfile
	}
	if override.ProcMount != nil {
		sc.ProcMount = override.ProcMount
	}
	if override.WindowsOptions != nil {
		sc.WindowsOptions = override.WindowsOptions
	}
	return sc
}
