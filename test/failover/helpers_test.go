package failover

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/test/fixtures"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/flagsets"
)

func repoRoot() string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())
	return root
}

// counterFlag is the flag each edit sets: its one variant holds the
// number of the edit, so that a ConfigMap's content tells which edit it is.
const counterFlag = "edit"

func flagSet(ns, name string) *v1beta1.FeatureFlag {
	ff := fixtures.FlagSet(ns, name, "off")
	ff.Spec.FlagSpec.Flags[counterFlag] = counterValue(0)
	return ff
}

func counterValue(n int) v1beta1.Flag {
	return v1beta1.Flag{State: v1beta1.FlagStateEnabled, Variants: json.RawMessage(`{"n":` + strconv.Itoa(n) + `}`), DefaultVariant: "n"}
}

// setCounter writes edit n into the flag set, retrying on conflicts (the
// manager writes its status meanwhile).
func setCounter(ctx context.Context, key client.ObjectKey, n int) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ff := &v1beta1.FeatureFlag{}
		if err := k8s.Get(ctx, key, ff); err != nil {
			return err
		}
		ff.Spec.FlagSpec.Flags[counterFlag] = counterValue(n)
		return k8s.Update(ctx, ff)
	})).To(Succeed())
}

// counterIn reads the edit number out of a flag set's flagd JSON; -1 when
// there is none.
func counterIn(content string) int {
	var doc struct {
		Flags map[string]json.RawMessage `json:"flags"`
	}
	var flag struct {
		Variants map[string]int `json:"variants"`
	}
	if json.Unmarshal([]byte(content), &doc) != nil || json.Unmarshal(doc.Flags[counterFlag], &flag) != nil {
		return -1
	}
	n, ok := flag.Variants["n"]
	if !ok {
		return -1
	}
	return n
}

// leaseHolder is the identity holding the replicas' Lease, "" when none.
func leaseHolder(ctx context.Context, id string) func() string {
	return func() string {
		l := &coordinationv1.Lease{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: leaseNamespace, Name: id}, l); err != nil {
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "reading the Lease: %v", err)
			return ""
		}
		if l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
}

// world is the flag sets, and the namespaces that use each of them.
type world struct {
	home       string
	flagSets   []string
	namespaces []string // home first
}

// converged returns nil once every ConfigMap holds its flag set's current
// content and every status is about the current generation and True.
func (w world) converged(ctx context.Context) error {
	for _, fs := range w.flagSets {
		ff := &v1beta1.FeatureFlag{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: w.home, Name: fs}, ff); err != nil {
			return err
		}
		want, _, err := flagsets.Serve(ff)
		if err != nil {
			return err
		}
		if err := conditionTrue(ff.Status.Conditions, v1beta1.ConditionAccepted, ff.Generation); err != nil {
			return fmt.Errorf("FeatureFlag %s: %w", fs, err)
		}
		for _, ns := range w.namespaces {
			cm := &corev1.ConfigMap{}
			key := client.ObjectKey{Namespace: ns, Name: topology.ConfigMapName(topology.FlagSetKey(w.home, fs))}
			if err := k8s.Get(ctx, key, cm); err != nil {
				return fmt.Errorf("ConfigMap %s: %w", key, err)
			}
			if got := cm.Data[topology.ConfigMapDataKey(topology.FlagSetKey(w.home, fs))]; got != want {
				return fmt.Errorf("ConfigMap %s holds edit %d, the flag set is at edit %d", key, counterIn(got), counterIn(want))
			}
		}
	}
	for _, ns := range w.namespaces {
		src := &v1beta1.FeatureFlagSource{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "flags"}, src); err != nil {
			return err
		}
		for _, t := range []string{v1beta1.ConditionAccepted, v1beta1.ConditionResolvedRefs, v1beta1.ConditionProgrammed} {
			if err := conditionTrue(src.Status.Conditions, t, src.Generation); err != nil {
				return fmt.Errorf("FeatureFlagSource %s/flags: %w", ns, err)
			}
		}
	}
	return nil
}

func conditionTrue(conds []metav1.Condition, t string, generation int64) error {
	c := meta.FindStatusCondition(conds, t)
	switch {
	case c == nil:
		return fmt.Errorf("no %s condition", t)
	case c.ObservedGeneration != generation:
		return fmt.Errorf("%s is about generation %d, not %d", t, c.ObservedGeneration, generation)
	case c.Status != metav1.ConditionTrue:
		return fmt.Errorf("%s is %s/%s: %s", t, c.Status, c.Reason, c.Message)
	}
	return nil
}

// monitor watches every generated ConfigMap from the test's own connection
// (no faults) and records what the replicas did to them: deletions, updates
// that leave a ConfigMap without its flag set's content, and updates that
// go back to an earlier edit.
type monitor struct {
	mu          sync.Mutex
	events      int
	deleted     []string
	emptied     []string
	regressions []string
	last        map[string]int
	stop        context.CancelFunc
	done        chan struct{}
}

func startMonitor(ctx context.Context, w world) *monitor {
	GinkgoHelper()
	cs, err := kubernetes.NewForConfig(cp.Config)
	Expect(err).NotTo(HaveOccurred())
	selector := metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: workflows.ManagedLabels()})
	list, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: selector})
	Expect(err).NotTo(HaveOccurred())
	m := &monitor{last: map[string]int{}, done: make(chan struct{})}
	for _, cm := range list.Items {
		m.last[cm.Namespace+"/"+cm.Name] = counterIn(firstValue(cm.Data))
	}
	watchCtx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	rw, err := watchtools.NewRetryWatcherWithContext(watchCtx, list.ResourceVersion, &toolscache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return cs.CoreV1().ConfigMaps("").Watch(ctx, o)
		},
	})
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer close(m.done)
		defer rw.Stop()
		for {
			select {
			case <-watchCtx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				m.observe(ev)
			}
		}
	}()
	return m
}

func firstValue(data map[string]string) string {
	for _, v := range data {
		return v
	}
	return ""
}

func (m *monitor) observe(ev watch.Event) {
	cm, ok := ev.Object.(*corev1.ConfigMap)
	if !ok {
		return
	}
	name := cm.Namespace + "/" + cm.Name
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events++
	switch ev.Type {
	case watch.Deleted:
		m.deleted = append(m.deleted, name)
	case watch.Added, watch.Modified:
		n := counterIn(firstValue(cm.Data))
		if len(cm.Data) != 1 || n < 0 {
			m.emptied = append(m.emptied, fmt.Sprintf("%s (%d keys)", name, len(cm.Data)))
			return
		}
		if before, ok := m.last[name]; ok && n < before {
			m.regressions = append(m.regressions, fmt.Sprintf("%s: edit %d after %d", name, n, before))
		}
		m.last[name] = n
	}
}

func (m *monitor) close() {
	m.stop()
	<-m.done
}

func writeFile(path string, data []byte) error { return os.WriteFile(path, data, 0o600) }
