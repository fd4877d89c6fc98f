package webhooks

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/injection"
	"github.com/flagplane/flagplane/workflows/restarts"
)

func healerFixture(t *testing.T, objs ...client.Object) (*Healer, client.Client, *events.FakeRecorder, *time.Time) {
	t.Helper()
	byController := func(obj client.Object) []string {
		if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
			return []string{ref.Kind + "/" + ref.Name}
		}
		return nil
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithIndex(&corev1.Pod{}, restarts.ControllerIndex, byController).
		WithIndex(&appsv1.ReplicaSet{}, restarts.ControllerIndex, byController).Build()
	rec := events.NewFakeRecorder(10)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	h := &Healer{Graph: newGraph(t, graphManifests), Resolver: restarts.Owners{Reader: c}, Reader: c, Client: c,
		Events: rec, Options: injection.DefaultOptions(), Backoff: 5 * time.Minute, Now: func() time.Time { return now }}
	return h, c, rec, &now
}

func webDeployment(restartedAt string) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "web-uid"}}
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	d.Spec.Template.Labels = map[string]string{"app": "web"}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "app"}}
	if restartedAt != "" {
		d.Spec.Template.Annotations = map[string]string{restarts.RestartedAtAnnotation: restartedAt}
	}
	return d
}

func replicaSet(name, deployment string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment, UID: "web-uid", Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": deployment}}}}
}

func pod(name, rs string, created time.Time, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, CreationTimestamp: metav1.NewTime(created), Annotations: annotations,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: "rs", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
}

func restartedAtOf(t *testing.T, c client.Client) string {
	d := &appsv1.Deployment{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: "web"}, d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Annotations[restarts.RestartedAtAnnotation]
}

func TestHealer(t *testing.T) {
	ctx := context.Background()
	web := topology.WorkloadKey(topology.KindDeployment, "shop", "web")
	created := time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)
	injected := map[string]string{restarts.AnnotationInjection: "abc"}

	t.Run("pods that all have their injection: nothing", func(t *testing.T) {
		g := NewWithT(t)
		h, c, rec, _ := healerFixture(t, webDeployment(""), replicaSet("web-1", "web"), pod("web-1-a", "web-1", created, injected))
		g.Expect(h.Heal(ctx, web)).To(BeZero())
		g.Expect(restartedAtOf(t, c)).To(BeEmpty())
		g.Expect(rec.Events).To(BeEmpty())
	})

	t.Run("a pod admitted without its injection: the Deployment is restarted once, with an Event", func(t *testing.T) {
		g := NewWithT(t)
		h, c, rec, now := healerFixture(t, webDeployment(""), replicaSet("web-1", "web"),
			pod("web-1-a", "web-1", created, injected), pod("web-1-b", "web-1", created, nil))
		g.Expect(h.Heal(ctx, web)).To(BeZero())
		g.Expect(restartedAtOf(t, c)).To(Equal("2026-03-01T12:00:00Z"))
		g.Expect(<-rec.Events).To(And(ContainSubstring("Warning InjectionMissing"),
			ContainSubstring("pod web-1-b runs without its flagd injection and never reached the admission webhook"),
			ContainSubstring("the Deployment is targeted by FeatureFlagSource shop/flags")),
			"no admission record: the webhook never saw it, whenever the workload was targeted")

		*now = now.Add(time.Minute)
		retry, err := h.Heal(ctx, web)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(retry).To(BeZero(), "the pod is older than the restart: it is being replaced")
	})

	// What the Event says, from the pod's admission record and when this
	// process saw the workload become targeted (an hour after the first
	// pod, at 12:00:00.700). Creation times have whole seconds.
	admitted := map[string]string{restarts.AnnotationAdmitted: restarts.AdmittedNothingToInject}
	targeted := created.Add(time.Hour + 700*time.Millisecond)
	for _, tc := range []struct {
		name        string
		seen        bool // this process saw the workload become targeted
		podCreated  time.Time
		annotations map[string]string
		reason      string
		note        string
	}{
		{"a pod older than the targeting predates it", true, created, nil, EventTargeted,
			"pod web-1-b was created before the Deployment was targeted by FeatureFlagSource shop/flags"},
		{"a pod older than the targeting, admitted with nothing to inject, predates it", true, created, admitted, EventTargeted,
			"pod web-1-b was created before the Deployment was targeted by FeatureFlagSource shop/flags"},
		// Two replicas serve the webhook: the one that admitted the pod
		// may learn of a new source after the leader did (issue 24).
		{"a pod younger than the targeting that the webhook admitted with nothing to inject: admitted before flagplane knew", true,
			created.Add(time.Hour + time.Minute), admitted, EventTargeted,
			"pod web-1-b was admitted with nothing to inject, before flagplane knew the Deployment was targeted by FeatureFlagSource shop/flags"},
		{"within the second of the targeting, admitted by the webhook with nothing to inject", true,
			created.Add(time.Hour), admitted, EventTargeted, "was admitted with nothing to inject, before flagplane knew"},
		{"a pod younger than the targeting with no admission record never reached the webhook", true,
			created.Add(time.Hour + time.Minute), nil, EventInjectionMissing,
			"pod web-1-b was created after the Deployment was targeted by FeatureFlagSource shop/flags and never reached the admission webhook"},
		{"within the second of the targeting, with no admission record", true,
			created.Add(time.Hour), nil, EventInjectionMissing, "never reached the admission webhook"},
		{"targeting not seen by this process, admitted with nothing to inject", false, created, admitted, EventTargeted,
			"pod web-1-b was admitted with nothing to inject, before flagplane knew the Deployment was targeted by FeatureFlagSource shop/flags"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h, _, rec, now := healerFixture(t, webDeployment(""), replicaSet("web-1", "web"), pod("web-1-b", "web-1", tc.podCreated, tc.annotations))
			if tc.seen {
				*now = targeted
				h.WorkloadsChanged([]topology.Key{web})
			}
			*now = created.Add(2 * time.Hour)
			g.Expect(h.Heal(ctx, web)).To(BeZero())
			g.Expect(<-rec.Events).To(And(ContainSubstring("Warning "+tc.reason), ContainSubstring(tc.note)))
		})
	}

	t.Run("pods created before the last restart are being replaced already", func(t *testing.T) {
		g := NewWithT(t)
		h, c, _, _ := healerFixture(t, webDeployment("2026-03-01T11:30:00Z"), replicaSet("web-1", "web"), pod("web-1-b", "web-1", created, nil))
		g.Expect(h.Heal(ctx, web)).To(BeZero())
		g.Expect(restartedAtOf(t, c)).To(Equal("2026-03-01T11:30:00Z"))
	})

	t.Run("within the backoff a workload is not restarted again", func(t *testing.T) {
		g := NewWithT(t)
		h, c, _, now := healerFixture(t, webDeployment(""), replicaSet("web-1", "web"), pod("web-1-b", "web-1", created, nil))
		g.Expect(h.Heal(ctx, web)).To(BeZero())
		// The webhook is still down: the new pods come without injection too.
		g.Expect(c.Create(ctx, pod("web-2-a", "web-1", now.Add(time.Minute), nil))).To(Succeed())
		*now = now.Add(2 * time.Minute)
		retry, err := h.Heal(ctx, web)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(retry).To(Equal(3 * time.Minute))
		g.Expect(restartedAtOf(t, c)).To(Equal("2026-03-01T12:00:00Z"))
		*now = now.Add(3 * time.Minute)
		g.Expect(h.Heal(ctx, web)).To(BeZero())
		g.Expect(restartedAtOf(t, c)).To(Equal("2026-03-01T12:05:00Z"))
	})

	// Two replicas serve the webhook, and the one that admits a pod may
	// know of the workload's targeting later than the leader does. The
	// pods of a restart that reach it are admitted with nothing to inject
	// again: they are not held back for all of the backoff (a run of the
	// real install waited 5 minutes so), and a replica that never catches
	// up does not roll the workload in a loop.
	t.Run("pods of a restart that the webhook admitted with nothing to inject again: restarted after a short backoff that doubles", func(t *testing.T) {
		g := NewWithT(t)
		h, c, rec, now := restartedForAPodAdmittedWithNothing(t, g)

		successor := func(name string, after time.Duration, annotations map[string]string) {
			p := pod(name, "web-1", now.Add(after), annotations)
			p.UID = types.UID(name)
			g.Expect(c.Create(ctx, p)).To(Succeed())
		}
		admitted := map[string]string{restarts.AnnotationAdmitted: restarts.AdmittedNothingToInject}
		successor("web-2-a", time.Second, admitted)
		*now = now.Add(2 * time.Second)
		retry, err := h.Heal(ctx, web)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(retry).To(Equal(3*time.Second), "5s after the restart, not 5 minutes")
		*now = now.Add(3 * time.Second)
		g.Expect(h.Heal(ctx, web)).To(BeZero())
		g.Expect(restartedAtOf(t, c)).To(Equal("2026-03-01T12:00:05Z"))
		g.Expect(<-rec.Events).To(ContainSubstring("pod web-2-a was admitted with nothing to inject, before flagplane knew"))

		By := "each restart in a row waits twice as long"
		successor("web-3-a", time.Second, admitted)
		*now = now.Add(time.Second)
		retry, err = h.Heal(ctx, web)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(retry).To(Equal(9*time.Second), By)

		By = "a pod that never reached the webhook waits all of the backoff"
		g.Expect(c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-3-a"}})).To(Succeed())
		successor("web-3-b", 0, nil)
		retry, err = h.Heal(ctx, web)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(retry).To(Equal(5*time.Minute-time.Second), By)

		By = "after a quiet backoff the next restart waits the first step again"
		*now = now.Add(5 * time.Minute)
		g.Expect(h.Heal(ctx, web)).To(BeZero(), By)
		g.Expect(restartedAtOf(t, c)).To(Equal("2026-03-01T12:05:06Z"), By)
		g.Expect(h.streak[web]).To(Equal(1), By)
	})

	// The restart's pod reached the webhook but lacked a ConfigMap that
	// could not be written then (its name was taken): once the ConfigMap
	// exists, it is healed within seconds, not at the end of the backoff
	// the first restart began.
	t.Run("an incomplete pod of a restart is healed within seconds of its ConfigMap's coming", func(t *testing.T) {
		g := NewWithT(t)
		h, c, rec, now := restartedForAPodAdmittedWithNothing(t, g)

		next := pod("web-2-a", "web-1", now.Add(time.Second), map[string]string{
			restarts.AnnotationInjection: "abc", restarts.AnnotationIncomplete: "shop/checkout"})
		next.UID = "web-2-a"
		g.Expect(c.Create(ctx, next)).To(Succeed())
		g.Expect(c.Create(ctx, generatedConfigMap("checkout"))).To(Succeed())
		*now = now.Add(30 * time.Second)
		g.Expect(h.Heal(ctx, web)).To(BeZero())
		g.Expect(restartedAtOf(t, c)).To(Equal("2026-03-01T12:00:30Z"), "not 4 minutes 30 seconds later")
		g.Expect(<-rec.Events).To(ContainSubstring("pod web-2-a was admitted without flag sets whose ConfigMaps could not be written then; they exist now: shop/checkout"))
	})

	t.Run("a replica that never learns of the targeting: the wait doubles up to the backoff", func(t *testing.T) {
		g := NewWithT(t)
		h, _, _, _ := healerFixture(t)
		p := pod("web-1-a", "web-1", created, map[string]string{restarts.AnnotationAdmitted: restarts.AdmittedNothingToInject})
		h.streak = map[topology.Key]int{}
		var waits []time.Duration
		for n := 1; n <= 9; n++ {
			h.streak[web] = n
			waits = append(waits, h.backoff(web, p, false))
		}
		g.Expect(waits).To(Equal([]time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second,
			80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute, 5 * time.Minute}))
		g.Expect(h.backoff(web, p, true)).To(Equal(5*time.Minute), "restarted for this very pod already: all of the backoff")
	})

	// A pod whose only flag set's ConfigMap could not be written got no
	// sidecar at all: its injection fingerprint is empty. It is healed on
	// the same terms as one that lacks some of its flag sets (a run of
	// test/gitops saw it restarted while the ConfigMap was still missing,
	// with an Event naming no flag set).
	for _, c := range []struct{ got, fingerprint string }{{"some of its flag sets", "abc"}, {"nothing", ""}} {
		t.Run("a pod admitted with "+c.got+" because a ConfigMap was missing is healed once that exists, not before", func(t *testing.T) {
			g := NewWithT(t)
			incomplete := map[string]string{restarts.AnnotationInjection: c.fingerprint, restarts.AnnotationIncomplete: "shop/checkout"}
			h, k8s, rec, _ := healerFixture(t, webDeployment(""), replicaSet("web-1", "web"), pod("web-1-a", "web-1", created, incomplete))
			g.Expect(h.Heal(ctx, web)).To(BeZero())
			g.Expect(restartedAtOf(t, k8s)).To(BeEmpty(), "its ConfigMap is still missing: nothing better to give it")
			g.Expect(rec.Events).To(BeEmpty())

			By := "a ConfigMap of its name that flagplane does not manage: never mounted, so nothing better yet"
			cm := generatedConfigMap("checkout")
			cm.Labels = nil
			g.Expect(k8s.Create(ctx, cm)).To(Succeed())
			g.Expect(h.Heal(ctx, web)).To(BeZero(), By)
			g.Expect(restartedAtOf(t, k8s)).To(BeEmpty(), By)
			g.Expect(rec.Events).To(BeEmpty(), By)

			cm.Labels = generatedConfigMap("checkout").Labels
			g.Expect(k8s.Update(ctx, cm)).To(Succeed())
			g.Expect(h.Heal(ctx, web)).To(BeZero())
			g.Expect(restartedAtOf(t, k8s)).NotTo(BeEmpty())
			g.Expect(<-rec.Events).To(And(ContainSubstring("Warning "+EventInjectionMissing),
				ContainSubstring("pod web-1-a was admitted without flag sets whose ConfigMaps could not be written then; they exist now: shop/checkout:")))
		})
	}

	t.Run("what an incomplete pod lacked and its workload no longer mounts is not claimed to exist", func(t *testing.T) {
		g := NewWithT(t)
		// shop/gone is no flag set of web's: its ConfigMap exists nowhere.
		incomplete := map[string]string{restarts.AnnotationInjection: "abc", restarts.AnnotationIncomplete: "shop/gone"}
		h, c, rec, _ := healerFixture(t, webDeployment(""), replicaSet("web-1", "web"), pod("web-1-a", "web-1", created, incomplete))
		g.Expect(c.Create(ctx, generatedConfigMap("checkout"))).To(Succeed(), "every ConfigMap web mounts now exists")
		g.Expect(h.Heal(ctx, web)).To(BeZero())
		g.Expect(restartedAtOf(t, c)).To(BeEmpty(), "it lacks nothing its workload mounts now: a changed injection is rolloutOnChange's")
		g.Expect(rec.Events).To(BeEmpty())

		By := "lacking one that exists and one that is gone: healed, and the Event tells them apart"
		p := &corev1.Pod{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web-1-a"}, p)).To(Succeed())
		p.Annotations[restarts.AnnotationIncomplete] = "shop/checkout,shop/gone"
		g.Expect(c.Update(ctx, p)).To(Succeed())
		g.Expect(h.Heal(ctx, web)).To(BeZero(), By)
		g.Expect(restartedAtOf(t, c)).NotTo(BeEmpty(), By)
		g.Expect(<-rec.Events).To(ContainSubstring("they exist now: shop/checkout (no longer mounted: shop/gone):"), By)
	})

	t.Run("a pod admitted with references that did not resolve is healed once what it would get differs, backoff or not", func(t *testing.T) {
		g := NewWithT(t)
		probe, _, _, _ := healerFixture(t)
		desired := injection.Desired(probe.Graph.Topology().Snapshot(), web, probe.Options).Fingerprint()
		unresolved := func(fingerprint string) map[string]string {
			return map[string]string{restarts.AnnotationInjection: fingerprint, restarts.AnnotationUnresolved: "FeatureFlagSource shop/missing"}
		}

		h, c, _, _ := healerFixture(t, webDeployment(""), replicaSet("web-1", "web"), pod("web-1-a", "web-1", created, unresolved(desired)))
		g.Expect(h.Heal(ctx, web)).To(BeZero())
		g.Expect(restartedAtOf(t, c)).To(BeEmpty(), "it got what it would get now: nothing has resolved since")

		first := pod("web-1-a", "web-1", created, unresolved("older"))
		first.UID = "web-1-a"
		h, cache, rec, now := healerFixture(t, webDeployment(""), replicaSet("web-1", "web"), first)
		// Restarts are written to the API server, which the cache shows
		// a moment later.
		api := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(webDeployment("")).Build()
		h.Client = api
		g.Expect(h.Heal(ctx, web)).To(BeZero())
		g.Expect(restartedAtOf(t, api)).To(Equal("2026-03-01T12:00:00Z"))
		g.Expect(<-rec.Events).To(And(ContainSubstring("Warning "+EventTargeted),
			ContainSubstring("pod web-1-a was admitted without FeatureFlagSource shop/missing, which its annotations name and which did not resolve then")))

		By := "the same pod again, before the cache shows the restart: it is being replaced already"
		*now = now.Add(time.Second)
		g.Expect(h.Heal(ctx, web)).To(BeZero(), By)
		g.Expect(restartedAtOf(t, api)).To(Equal("2026-03-01T12:00:00Z"), By)

		By = "a pod of the restart that again missed something that has resolved since: within the backoff, healed all the same"
		g.Expect(cache.Update(ctx, webDeployment("2026-03-01T12:00:00Z"))).To(Succeed())
		next := pod("web-2-a", "web-1", now.Add(time.Minute), unresolved("between"))
		next.UID = "web-2-a"
		g.Expect(cache.Create(ctx, next)).To(Succeed())
		*now = now.Add(2 * time.Minute)
		g.Expect(h.Heal(ctx, web)).To(BeZero(), By)
		g.Expect(restartedAtOf(t, api)).To(Equal("2026-03-01T12:02:01Z"), By)
	})

	t.Run("an Event naming more than its note holds is cut, not lost", func(t *testing.T) {
		g := NewWithT(t)
		many := make([]string, 40)
		for i := range many {
			many[i] = "FeatureFlagSource shop/" + strings.Repeat("s", 60) + strconv.Itoa(i)
		}
		unresolved := map[string]string{restarts.AnnotationInjection: "older", restarts.AnnotationUnresolved: strings.Join(many, ",")}
		p := pod("web-1-a", "web-1", created, unresolved)
		p.UID = "web-1-a"
		h, c, rec, _ := healerFixture(t, webDeployment(""), replicaSet("web-1", "web"), p)
		g.Expect(h.Heal(ctx, web)).To(BeZero())
		g.Expect(restartedAtOf(t, c)).NotTo(BeEmpty())
		ev := <-rec.Events
		g.Expect(ev).To(And(HavePrefix("Warning "+EventTargeted+" pod web-1-a was admitted without"), HaveSuffix("…")))
		g.Expect(len(strings.TrimPrefix(ev, "Warning "+EventTargeted+" "))).To(BeNumerically("<=", workflows.NoteMaxLength))
	})

	t.Run("a workload no source applies to is never restarted", func(t *testing.T) {
		g := NewWithT(t)
		plain := webDeployment("")
		plain.Name = "plain"
		h, c, _, _ := healerFixture(t, plain, replicaSet("plain-1", "plain"), pod("plain-1-a", "plain-1", created, nil))
		g.Expect(h.Heal(ctx, topology.WorkloadKey(topology.KindDeployment, "shop", "plain"))).To(BeZero())
		d := &appsv1.Deployment{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "plain"}, d)).To(Succeed())
		g.Expect(d.Spec.Template.Annotations).To(BeEmpty())
	})
}

// generatedConfigMap is the ConfigMap flagplane generates for flag set
// shop/<flagSet> in shop, with its managed-by label.
func generatedConfigMap(flagSet string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: topology.ConfigMapName(topology.FlagSetKey("shop", flagSet)),
		Labels: map[string]string{v1beta1.LabelManagedBy: v1beta1.ManagedByValue}}}
}

// restartedForAPodAdmittedWithNothing is a healer that has restarted
// shop/web at 12:00:00 for its one pod, which the webhook admitted with
// nothing to inject before it knew of the targeting.
func restartedForAPodAdmittedWithNothing(t *testing.T, g Gomega) (*Healer, client.Client, *events.FakeRecorder, *time.Time) {
	t.Helper()
	first := pod("web-1-a", "web-1", time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC),
		map[string]string{restarts.AnnotationAdmitted: restarts.AdmittedNothingToInject})
	first.UID = "web-1-a"
	h, c, rec, now := healerFixture(t, webDeployment(""), replicaSet("web-1", "web"), first)
	g.Expect(h.Heal(context.Background(), topology.WorkloadKey(topology.KindDeployment, "shop", "web"))).To(BeZero())
	g.Expect(restartedAtOf(t, c)).To(Equal("2026-03-01T12:00:00Z"))
	g.Expect(<-rec.Events).To(ContainSubstring("Warning " + EventTargeted))
	return h, c, rec, now
}
