package node

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/flagplane/flagplane/test/controlplane"
)

// Defaults of Options.
const (
	DefaultName       = "flagplane-node"
	DefaultFlagdImage = "open-feature/flagd"
)

// KeepDirEnv, when set to a non-empty value, keeps Node.Dir (pod
// directories and container logs) after Stop.
const KeepDirEnv = "FLAGPLANE_KEEP_NODE"

// Options configures Start. The zero value runs flagd images with the
// flagd binary beside the control plane's binaries.
type Options struct {
	// Name of the Node; DefaultName when empty.
	Name string
	// FlagdImage is the image name (without tag) whose containers run as
	// FlagdBinary, with their port flags remapped. It matches any tag or
	// digest, and any registry or path prefix ("ghcr.io/open-feature/flagd").
	// DefaultFlagdImage when empty.
	FlagdImage string
	// FlagdBinary is the flagd executable; "flagd" in the control plane's
	// binary directory when empty.
	FlagdBinary string
	// Binaries maps further image names (matched as FlagdImage is) to local
	// executables that stand in for them, e.g. the OpenFeature SDK client of
	// test/realclients. Containers of any other image run as idle
	// placeholders.
	Binaries map[string]string
	// Capacity is the Node's capacity and allocatable; cpu 8, memory 16Gi,
	// pods 110 where unset.
	Capacity corev1.ResourceList
	// Labels are added to the Node's.
	Labels map[string]string
	// RestartBackoff is the first delay before restarting a failed
	// container, doubled on each further restart up to MaxRestartBackoff:
	// the kubelet's 10s and 5m when zero. Suites may shorten them.
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration
	// LeaseDuration of the node's Lease (renewed every quarter of it); 40s
	// when zero. StatusInterval is how often the Node's status heartbeat is
	// written; a minute when zero.
	LeaseDuration  time.Duration
	StatusInterval time.Duration
	// StopGrace bounds the grace period of the pods' processes when the
	// node stops; 2s when zero.
	StopGrace time.Duration
	// Log receives the agent's messages (os.Stderr when nil).
	Log io.Writer
	// KeepDir keeps Dir after Stop (see also KeepDirEnv).
	KeepDir bool
}

func (o *Options) complete(cp *controlplane.ControlPlane) error {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.FlagdImage == "" {
		o.FlagdImage = DefaultFlagdImage
	}
	if o.FlagdBinary == "" {
		o.FlagdBinary = filepath.Join(filepath.Dir(cp.KubectlPath), "flagd")
	}
	binaries := map[string]string{"flagd (" + o.FlagdImage + ")": o.FlagdBinary}
	for image, b := range o.Binaries {
		binaries[image] = b
	}
	for image, b := range binaries {
		info, err := os.Stat(b)
		if err != nil {
			return fmt.Errorf("binary for image %s: %w (flagd is built by `make realclients`)", image, err)
		}
		if info.IsDir() || info.Mode()&0o111 == 0 {
			return fmt.Errorf("binary for image %s: %s is not executable", image, b)
		}
	}
	defaults := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	capacity := corev1.ResourceList{}
	for k, v := range defaults {
		capacity[k] = v
	}
	for k, v := range o.Capacity {
		capacity[k] = v
	}
	o.Capacity = capacity
	if o.RestartBackoff == 0 {
		o.RestartBackoff = 10 * time.Second
	}
	if o.MaxRestartBackoff == 0 {
		o.MaxRestartBackoff = 5 * time.Minute
	}
	o.MaxRestartBackoff = max(o.MaxRestartBackoff, o.RestartBackoff)
	if o.LeaseDuration == 0 {
		o.LeaseDuration = 40 * time.Second
	}
	if o.StatusInterval == 0 {
		o.StatusInterval = time.Minute
	}
	if o.StopGrace == 0 {
		o.StopGrace = 2 * time.Second
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
	o.KeepDir = o.KeepDir || os.Getenv(KeepDirEnv) != ""
	return nil
}
