package injection_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/injection"
)

// TestVolumeNamesOfOnePodDiffer: two flag sets whose volume names are
// equal (names alike in their first 40 characters, 32-bit hashes equal,
// which a tenant can search for) get two volumes in one pod; Without
// drops the one of the ConfigMap it is given, whatever its name.
func TestVolumeNamesOfOnePodDiffer(t *testing.T) {
	g := NewWithT(t)
	a, b := volumeNameTwins(t, "shop")
	g.Expect(injection.FlagVolumeName(a)).To(Equal(injection.FlagVolumeName(b)))

	topo := topology.New()
	for _, f := range []topology.Key{a, b} {
		_, err := topo.UpsertFlagSet(&v1beta1.FeatureFlag{ObjectMeta: metav1.ObjectMeta{Namespace: f.Namespace, Name: f.Name}})
		g.Expect(err).NotTo(HaveOccurred())
	}
	src := &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "src"}}
	src.Spec.Sources = []v1beta1.Source{{Source: a.Name}, {Source: b.Name}}
	src.Spec.TargetRefs = []v1beta1.TargetRef{{Group: "apps", Kind: "Deployment", Name: "web"}}
	_, err := topo.UpsertSource(src)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = topo.UpsertWorkload(topology.Workload{Kind: topology.KindDeployment, Namespace: "shop", Name: "web"})
	g.Expect(err).NotTo(HaveOccurred())
	web := topology.WorkloadKey(topology.KindDeployment, "shop", "web")

	inj := injection.Desired(topo.Snapshot(), web, injection.DefaultOptions())
	g.Expect(inj.Volumes).To(HaveLen(2))
	first, second := inj.Volumes[0].Name, inj.Volumes[1].Name
	g.Expect(first).To(Equal(injection.FlagVolumeName(a)), "the first keeps the plain name")
	g.Expect(second).To(Equal(first + "-2"))
	g.Expect(validation.IsDNS1123Label(second)).To(BeEmpty())
	g.Expect(inj.Sidecar.VolumeMounts).To(ConsistOf(
		corev1.VolumeMount{Name: first, MountPath: injection.FlagMountDir(a), ReadOnly: true},
		corev1.VolumeMount{Name: second, MountPath: injection.FlagMountDir(b), ReadOnly: true}))

	out := inj.Without(topology.ConfigMapKey(a, "shop"))
	g.Expect(out.Volumes).To(ConsistOf(HaveField("Name", second)))
	g.Expect(out.Sidecar.VolumeMounts).To(ConsistOf(HaveField("Name", second)))
	i := slices.Index(out.Sidecar.Args, "--sources")
	var entries []injection.FlagdSourceConfig
	g.Expect(json.Unmarshal([]byte(out.Sidecar.Args[i+1]), &entries)).To(Succeed())
	g.Expect(entries).To(ConsistOf(HaveField("URI", injection.FlagFilePath(b))))
}

// volumeNameTwins searches two flag sets of namespace ns with one volume name.
func volumeNameTwins(t *testing.T, ns string) (topology.Key, topology.Key) {
	t.Helper()
	prefix := strings.Repeat("v", 40) + "-"
	seen := map[string]topology.Key{}
	for i := range 1 << 22 {
		f := topology.FlagSetKey(ns, prefix+strconv.Itoa(i))
		n := injection.FlagVolumeName(f)
		if other, ok := seen[n]; ok {
			return other, f
		}
		seen[n] = f
	}
	t.Fatal("no two names with one volume name")
	return topology.Key{}, topology.Key{}
}

// TestMountPathsOfTheLongestNames: the directory and the file of a flag
// set are the OpenFeature Operator's where they fit, and each of their
// components a file name Linux takes for the longest names.
func TestMountPathsOfTheLongestNames(t *testing.T) {
	g := NewWithT(t)
	short := topology.FlagSetKey("shop", "flags")
	g.Expect(injection.FlagFilePath(short)).To(Equal("/etc/flagd/shop_flags/shop_flags.flagd.json"))
	long := topology.FlagSetKey(strings.Repeat("n", 63), strings.Repeat("f", 252)+"z")
	for _, c := range strings.Split(injection.FlagFilePath(long), "/") {
		g.Expect(len(c)).To(BeNumerically("<=", topology.FileNameMaxLength))
	}
	g.Expect(injection.FlagFilePath(long)).To(HavePrefix(injection.FlagMountDir(long) + "/"))
}
