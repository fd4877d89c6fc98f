package realclients

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// projectedVolume writes a ConfigMap's data into a directory the way the
// kubelet's atomic writer projects a ConfigMap volume:
//
//	dir/..2026_01_02_15_04_05.000000001/<key>   the files of one version
//	dir/..data -> ..2026_01_02_15_04_05.000000001
//	dir/<key>  -> ..data/<key>
//
// An update writes a new version directory, points a "..data_tmp" symlink
// at it, renames that over "..data" (the atomic step a reader can observe)
// and removes the old version. So a reader never sees half a file, and a
// reader watching <key> sees it change through a symlink it never opened.
type projectedVolume struct {
	dir     string
	current string // name of the version directory ..data points to
	data    map[string]string
}

func newProjectedVolume() *projectedVolume {
	return &projectedVolume{dir: GinkgoT().TempDir()}
}

// path is where a container reads key.
func (v *projectedVolume) path(key string) string { return filepath.Join(v.dir, key) }

// write projects data, unless it is what is projected already.
func (v *projectedVolume) write(data map[string]string) {
	if v.current != "" && maps.Equal(v.data, data) {
		return
	}
	version := time.Now().UTC().Format("..2006_01_02_15_04_05.000000000")
	Expect(os.Mkdir(filepath.Join(v.dir, version), 0o755)).To(Succeed())
	for k, content := range data {
		Expect(os.WriteFile(filepath.Join(v.dir, version, k), []byte(content), 0o644)).To(Succeed())
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	Expect(os.Symlink(version, tmp)).To(Succeed())
	Expect(os.Rename(tmp, filepath.Join(v.dir, "..data"))).To(Succeed())
	for k := range data {
		link := filepath.Join(v.dir, k)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			Expect(os.Symlink(filepath.Join("..data", k), link)).To(Succeed())
		}
	}
	if v.current != "" {
		Expect(os.RemoveAll(filepath.Join(v.dir, v.current))).To(Succeed())
	}
	v.current, v.data = version, maps.Clone(data)
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
