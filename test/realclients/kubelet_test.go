package realclients

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/test/node/atomicwriter"
)

// projectedVolume is a directory into which a ConfigMap's data is projected
// the way the kubelet projects a ConfigMap volume (test/node/atomicwriter:
// a "..data" symlink swapped atomically on every update).
type projectedVolume struct {
	*atomicwriter.Writer
}

func newProjectedVolume() *projectedVolume {
	w, err := atomicwriter.New(GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	return &projectedVolume{w}
}

// path is where a container reads key.
func (v *projectedVolume) path(key string) string { return filepath.Join(v.Dir(), key) }

// write projects data, unless it is what is projected already.
func (v *projectedVolume) write(data map[string]string) {
	payload := atomicwriter.Payload{}
	for k, content := range data {
		payload[k] = atomicwriter.File{Data: []byte(content)}
	}
	_, err := v.Write(payload)
	Expect(err).NotTo(HaveOccurred())
}

// kubelet keeps a projected volume in step with a ConfigMap of the cluster,
// as the kubelet does for a mounted ConfigMap, until the spec ends.
func kubelet(ctx context.Context, c client.Client, key client.ObjectKey) *projectedVolume {
	v := newProjectedVolume()
	sync := func() (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, key, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, err
		}
		v.write(cm.Data)
		return true, nil
	}
	Eventually(sync).WithContext(ctx).Should(BeTrue(), "ConfigMap %s was never generated", key)

	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := sync(); err != nil && ctx.Err() == nil {
					Fail(fmt.Sprintf("projecting ConfigMap %s: %v", key, err))
				}
			}
		}
	}()
	DeferCleanup(func() { cancel(); <-done })
	return v
}
