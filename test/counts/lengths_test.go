package counts

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/webhooks"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/restarts"
)

// worstCase is the pod of a workload in the longest namespace whose
// sources read flagSets flag sets of the longest names, spread over
// sources sources, as the webhook injects it with this suite's operator
// (its sync server and namespace tokens), computed offline by the same
// code, and the refusal if the sidecar is left out.
func worstCase(provider v1beta1.SyncProviderType, sources, perSource int) (*corev1.Pod, *injection.Refusal) {
	GinkgoHelper()
	ns := longestNamespace("worst")
	topo := topology.New()
	for i := range sources * perSource {
		_, err := topo.UpsertFlagSet(flagSet(ns, longName(i), flagKey(i)))
		Expect(err).NotTo(HaveOccurred())
	}
	var names []string
	for s := range sources {
		src := fixtures.Source(ns, fmt.Sprintf("src-%02d-", s)+strings.Repeat("s", 246), entries(provider, s*perSource, (s+1)*perSource, longName))
		_, err := topo.UpsertSource(src)
		Expect(err).NotTo(HaveOccurred())
		names = append(names, src.Name)
	}
	d := deployment(ns, strings.Repeat("w", 253), map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: strings.Join(names, ",")})
	_, err := topo.UpsertWorkload(topology.WorkloadFrom(topology.KindDeployment, d, &d.Spec.Template))
	Expect(err).NotTo(HaveOccurred())
	opts := injection.DefaultOptions()
	opts.SyncServer, opts.SyncServerHeaders = op.SyncAddress, op.NamespaceTokens.HeadersFor
	inj, refusal := injection.DesiredWithRefusal(topo.Snapshot(), topology.WorkloadKey(topology.KindDeployment, ns, d.Name), opts)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: d.Name + "-", Annotations: d.Spec.Template.Annotations}, Spec: *d.Spec.Template.Spec.DeepCopy()}
	if refusal != nil {
		// What it would have been: the refused injection rendered alone.
		return pod, refusal
	}
	inj.ApplyTo(&pod.Spec)
	return pod, nil
}

func longestArg(pod *corev1.Pod) int {
	longest := 0
	for _, c := range pod.Spec.InitContainers {
		for _, a := range c.Args {
			longest = max(longest, len(a))
		}
	}
	return longest
}

var _ = Describe("lengths at the edges", func() {
	It("computes the worst combination: a 63-character namespace, 253-character names, 100 flag sets, 20 sources", func() {
		for _, provider := range []v1beta1.SyncProviderType{v1beta1.SyncProviderFile, v1beta1.SyncProviderKubernetes, v1beta1.SyncProviderFlagdProxy} {
			pod, refusal := worstCase(provider, 20, 5)
			Expect(refusal).To(BeNil(), "100 flag sets over 20 sources fit")
			AddReportEntry(fmt.Sprintf("worst case, %s, 100 flag sets over 20 sources", provider),
				fmt.Sprintf("pod %d bytes (protobuf), longest argument %d bytes of %d", pod.Size(), longestArg(pod), injection.MaxArgBytes))
			_, refusal = worstCase(provider, 20, 100)
			Expect(refusal).NotTo(BeNil(), "20 sources of 100 flag sets each do not")
			AddReportEntry(fmt.Sprintf("worst case, %s, 20 sources of 100 flag sets", provider), refusal.String())
		}
	})

	It("refuses a source whose own entries make flagd's --sources longer than Linux takes, and admits one just under", func(ctx SpecContext) {
		ns := newNamespace(ctx, longestNamespace("args"))
		cfg, _ := injection.EntryOfSource(ns, v1beta1.Source{Source: longName(0)}, v1beta1.SyncProviderFile, injection.Options{})
		fit := (injection.MaxArgBytes - 1) / (injection.SourcesArgBytes([]injection.FlagdSourceConfig{cfg}) - 1)
		Expect(fit).To(BeNumerically("<", 256), "the schema takes 256 entries: the webhook is what refuses")

		under := fixtures.Source(ns, "under", entries(v1beta1.SyncProviderFile, 0, fit, longName))
		took := timedCall(ctx, sourceWebhook, func() { create(ctx, under) })
		AddReportEntry(fmt.Sprintf("FeatureFlagSource of %d file entries of the longest names", fit), "admission webhook "+took.String())

		over := fixtures.Source(ns, "over", entries(v1beta1.SyncProviderFile, 0, fit+1, longName))
		err := k8s.Create(ctx, over)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err).To(MatchError(And(ContainSubstring(fmt.Sprintf("spec.sources: Invalid value: \"%d entries\": flagd's --sources argument for these entries alone would be", fit+1)),
			ContainSubstring("over the 131071 bytes Linux takes in one argument (MAX_ARG_STRLEN)"))))

		By("one argument of its own too long: a context value")
		big := fixtures.Source(ns, "context", entries(v1beta1.SyncProviderFile, 0, 1, longName), func(s *v1beta1.FeatureFlagSource) {
			s.Spec.ContextValues = map[string]string{"region": strings.Repeat("x", injection.MaxArgBytes)}
		})
		Expect(k8s.Create(ctx, big)).To(MatchError(ContainSubstring("spec.contextValues[region]: Invalid value: ")))
	})

	It("admits a pod whose sources together make flagd's --sources too long without flagd, says why, and rolls it once they fit", func(ctx SpecContext) {
		ns := newNamespace(ctx, longestNamespace("together"))
		cfg, _ := injection.EntryOfSource(ns, v1beta1.Source{Source: longName(0)}, v1beta1.SyncProviderKubernetes, injection.Options{})
		perSource := 20
		sources := injection.MaxArgBytes/(perSource*injection.SourcesArgBytes([]injection.FlagdSourceConfig{cfg})) + 1
		flagSets(ctx, ns, sources*perSource, longName)
		var names []string
		for s := range sources {
			name := fmt.Sprintf("src-%02d", s)
			names = append(names, name)
			create(ctx, fixtures.Source(ns, name, entries(v1beta1.SyncProviderKubernetes, s*perSource, (s+1)*perSource, longName)))
		}
		create(ctx, deployment(ns, "web", map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: strings.Join(names, ",")}))

		// Before: flagd was injected, and the node could not start it
		// ("argument list too long"): the pod never came up.
		pod := readyPod(ctx, ns, "web", HaveField("ObjectMeta.Annotations", HaveKeyWithValue(restarts.AnnotationRefused,
			ContainSubstring("flagd sidecar not injected: flagd's --sources argument would be"))), 2*time.Minute)
		Expect(pod.Spec.InitContainers).To(BeEmpty())
		Expect(pod.Annotations[restarts.AnnotationRefused]).To(ContainSubstring(fmt.Sprintf("%d flag sources from %d FeatureFlagSource(s)", sources*perSource, sources)))
		Eventually(eventsAbout(ctx, ns, "Deployment", "web")).Should(ContainElement(And(HaveField("Reason", webhooks.EventInjectionRefused),
			HaveField("Note", ContainSubstring("over the 131071 bytes of MAX_ARG_STRLEN")))))
		Eventually(programmed(ctx, ns, names[0])).Should(And(HaveField("Reason", v1beta1.ReasonSidecarRefused),
			HaveField("Message", ContainSubstring("1 workload(s) get no flagd sidecar (Deployment "+ns+"/web)"))))

		By("deleting two of the sources: the rest fits, and the healer rolls the workload, whose new pod gets flagd")
		for _, name := range names[sources-2:] {
			Expect(k8s.Delete(ctx, &v1beta1.FeatureFlagSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
		}
		pod = readyPod(ctx, ns, "web", And(injected(), HaveField("ObjectMeta.Annotations", Not(HaveKey(restarts.AnnotationRefused)))), 3*time.Minute)
		Expect(sourcesOf(sidecarOf(pod))).To(HaveLen((sources - 2) * perSource))
		Eventually(eventsAbout(ctx, ns, "Deployment", "web")).Should(ContainElement(And(HaveField("Reason", webhooks.EventInjectionMissing),
			HaveField("Note", ContainSubstring("was admitted without its flagd sidecar")))))
		Eventually(resolve(flagdAddr(pod), flagKey(0))).Should(Equal(on))
		Eventually(programmed(ctx, ns, names[0])).Should(HaveField("Reason", v1beta1.ReasonProgrammed))
	})

	It("keeps a pod's annotations within 256 KiB when its annotation names thousands of sources that do not exist", func(ctx SpecContext) {
		ns := newNamespace(ctx, longestNamespace("annotations"))
		create(ctx, flagSet(ns, shortName(0), flagKey(0)), fixtures.Source(ns, "real", entries(v1beta1.SyncProviderFlagdProxy, 0, 1, shortName)))
		refs := []string{"real"}
		for i := range 3000 {
			refs = append(refs, fmt.Sprintf("m%04d", i))
		}
		// 18 KB of annotation; naming each missing one as
		// "FeatureFlagSource <namespace>/<name>" took 264 KB, and the API
		// server refused every pod of the workload (more than 256 KiB of
		// annotations).
		create(ctx, deployment(ns, "web", map[string]string{v1beta1.AnnotationEnabled: "true", v1beta1.AnnotationFeatureFlagSource: strings.Join(refs, ",")}))
		pod := readyPod(ctx, ns, "web", injected(), 2*time.Minute)
		Expect(len(pod.Annotations[restarts.AnnotationUnresolved])).To(BeNumerically("<=", 4096))
		Expect(pod.Annotations[restarts.AnnotationUnresolved]).To(MatchRegexp(`^FeatureFlagSource ` + ns + `/m0000,.*,and \d+ more$`))
		Eventually(resolve(flagdAddr(pod), flagKey(0))).Should(Equal(on))
	})

	It("admits a pod that its sidecar would make larger than the API server stores without the sidecar", func(ctx SpecContext) {
		ns := newNamespace(ctx, "")
		flagSets(ctx, ns, 10, shortName)
		create(ctx, fixtures.Source(ns, "flags", entries(v1beta1.SyncProviderFile, 0, 10, shortName), fixtures.Targeting("Deployment", "web")))
		d := deployment(ns, "web", nil)
		// A template 3 KiB under etcd's limit: its pod fits, with the
		// sidecar of 10 flag sets (about 4 KB) it does not. The bulk is
		// tolerations, which nothing on the node reads (a long argument
		// would pass what execve takes).
		prefix := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63)
		for i := 0; d.Spec.Template.Size() < injection.MaxPodBytes-3*1024-300; i++ {
			d.Spec.Template.Spec.Tolerations = append(d.Spec.Template.Spec.Tolerations, corev1.Toleration{
				Key: fmt.Sprintf("%s.k%05d.example.com/%s", prefix, i, strings.Repeat("v", 62)), Operator: corev1.TolerationOpExists})
		}
		create(ctx, d)
		pod := readyPod(ctx, ns, "web", HaveField("ObjectMeta.Annotations", HaveKeyWithValue(restarts.AnnotationRefused,
			ContainSubstring("flagd sidecar not injected: the pod would be"))), 2*time.Minute)
		Expect(pod.Spec.InitContainers).To(BeEmpty())
		AddReportEntry("pod near etcd's limit", fmt.Sprintf("%d bytes (protobuf) stored without the sidecar: %s", pod.Size(), pod.Annotations[restarts.AnnotationRefused]))
	})
})
