package workflows

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// SidecarOptions are the operator-wide settings of the injected flagd
// sidecar, set once from the manager's flags (--sidecar-image, --sidecar-tag,
// --sidecar-cpu-request, ...). What a FeatureFlagSource sets itself, such as
// its resources, overrides them for the workloads it targets.
type SidecarOptions struct {
	// Image is the flagd image, without its tag.
	Image string
	// Tag is the tag of Image.
	Tag string
	// Resources are the sidecar's requests and limits where a source sets none.
	Resources corev1.ResourceRequirements
}

// Defaults of SidecarOptions. The image has no registry: the manager's
// --sidecar-image names the registry a cluster pulls flagd from. The
// resources are the OpenFeature Operator's defaults.
const (
	DefaultSidecarImage      = "open-feature/flagd"
	DefaultSidecarTag        = "v0.16.0"
	DefaultSidecarCPURequest = "200m"
	DefaultSidecarRAMRequest = "32M"
	DefaultSidecarCPULimit   = "500m"
	DefaultSidecarRAMLimit   = "64M"
)

// DefaultSidecarOptions are the SidecarOptions when no flag is given.
func DefaultSidecarOptions() SidecarOptions {
	return SidecarOptions{
		Image: DefaultSidecarImage,
		Tag:   DefaultSidecarTag,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(DefaultSidecarCPURequest),
				corev1.ResourceMemory: resource.MustParse(DefaultSidecarRAMRequest),
			},
			Limits: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(DefaultSidecarCPULimit),
				corev1.ResourceMemory: resource.MustParse(DefaultSidecarRAMLimit),
			},
		},
	}
}

// ImageReference is the image reference of the sidecar container.
func (o SidecarOptions) ImageReference() string {
	if o.Tag == "" {
		return o.Image
	}
	return o.Image + ":" + o.Tag
}

// Validate reports settings that would make every injected pod invalid.
func (o SidecarOptions) Validate() error {
	if o.Image == "" {
		return errors.New("sidecar image is empty")
	}
	for name, req := range o.Resources.Requests {
		if lim, ok := o.Resources.Limits[name]; ok && req.Cmp(lim) > 0 {
			return fmt.Errorf("sidecar %s request %s exceeds its limit %s", name, req.String(), lim.String())
		}
	}
	return nil
}
