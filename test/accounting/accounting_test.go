package accounting

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flagplane/flagplane/metrics"
)

// Ordered: the specs share one manager, and the last one restarts it.
var _ = Describe("The manager's API requests", Ordered, func() {
	var m *manager

	BeforeAll(func(ctx SpecContext) {
		m = startManager(ctx)
		DeferCleanup(func() { m.stop() })
	})

	DescribeTable("a FeatureFlag edit used in k namespaces writes exactly k ConfigMaps, one status and one revision, and reads nothing",
		func(ctx SpecContext, k int) {
			ff, cms := flagSetUsedIn(ctx, k)
			m.settled(ctx)
			before := m.counts()

			setDefaultVariant(ctx, ff, "on")
			for _, cm := range cms {
				Eventually(ctx, contentOf(ctx, cm, ff)).Should(Equal(rendered(ff)), "ConfigMap %s", cm)
			}
			Eventually(ctx, statusObserved(ctx, ff)).Should(BeZero())
			m.settled(ctx)

			edit := m.counts().Sub(before)
			report("API requests of one edit", edit)
			for _, cm := range cms {
				Expect(programmed(ctx, cm.Namespace, "flags")).To(Equal("True/Programmed"),
					"once the manager has settled, the status of every source says what the cluster holds")
			}
			Expect(delivery(ctx, ff)).To(Equal(fmt.Sprintf("%s %d/%d True", revision(ff), k, k)),
				"the one status write says the edit and its delivery to every ConfigMap")
			Expect(edit.Count(configMapWrites)).To(Equal(k), "ConfigMap writes")
			Expect(edit.Count(statusWrites("featureflags.core.openfeature.dev"))).To(Equal(1),
				"FeatureFlag status writes: the edit waits for its ConfigMaps' writes, and one write carries both")
			Expect(edit.Count(statusWrites("featureflagsources.core.openfeature.dev"))).To(BeZero(),
				"FeatureFlagSource status writes: nothing a source reports changed")
			Expect(edit.Count(func(r metrics.APIRequest) bool {
				return r.Resource == "featureflagrevisions.delivery.flagplane.dev" && r.Write()
			})).To(Equal(1), "FeatureFlagRevision writes: the edit's revision (history under its limit prunes nothing)")
			Expect(edit.Writes()).To(Equal(k+2), "writes: nothing else")
			Expect(edit.Reads()).To(BeZero(), "reads: everything comes from the caches and the graph")
			Expect(edit.Count(func(r metrics.APIRequest) bool { return r.Code >= 300 })).To(BeZero(), "failed requests")
		},
		Entry("k = 1", 1),
		Entry("k = 4", 4),
	)

	It("a resync makes no request and reconciles nothing", func(ctx SpecContext) {
		flagSetUsedIn(ctx, 2)
		probe := m.probeResyncs(ctx)
		m.settled(ctx)
		before, events, reconciles := m.counts(), m.metricTotal("flagplane_events_total"), m.metricTotal("flagplane_reconcile_duration_seconds")
		resyncs := probe.snapshot()

		By("waiting for two resyncs of every object")
		Eventually(ctx, func(g Gomega) {
			now := probe.snapshot()
			for kind, n := range now {
				g.Expect(n-resyncs[kind]).To(BeNumerically(">=", 2*cachedObjects(ctx, m, kind)), "resyncs of %s", kind)
			}
		}).Should(Succeed())
		m.settled(ctx)

		during := m.counts().Sub(before)
		report("API requests during the resyncs", during)
		delivered := probe.snapshot()
		for kind := range delivered {
			delivered[kind] -= resyncs[kind]
		}
		AddReportEntry("objects delivered again", delivered)
		Expect(during.Count(nil)).To(BeZero(), "requests")
		Expect(m.metricTotal("flagplane_events_total")).To(Equal(events), "callbacks that found a relevant change")
		Expect(m.metricTotal("flagplane_reconcile_duration_seconds")).To(Equal(reconciles), "reconciliations")
	})

	It("a restart with nothing changed writes nothing", func(ctx SpecContext) {
		m.settled(ctx)
		m.stop()
		m = startManager(ctx)
		m.settled(ctx)

		startup := m.counts()
		report("API requests from the restart until settled", startup)
		Expect(startup.Writes()).To(BeZero(), "writes")
		Expect(startup.Count(func(r metrics.APIRequest) bool { return r.Verb == "get" && r.Resource != "" })).To(BeZero(),
			"gets of objects: the caches' lists are all it reads")
	})
})
