package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/workflows/status"
)

// demoStreaming is a second workload of the demo's namespace whose flagd
// streams shop-flags from flagplane's sync server (provider flagd-proxy)
// instead of reading a ConfigMap.
const demoStreaming = `apiVersion: apps/v1
kind: Deployment
metadata: {name: shop-api, namespace: %[1]s}
spec:
  selector: {matchLabels: {app: shop-api}}
  template:
    metadata: {labels: {app: shop-api}}
    spec:
      containers:
      - name: api
        image: busybox:1.37
        command: ["sh", "-c", "while true; do sleep 3600; done"]
        securityContext: {allowPrivilegeEscalation: false, runAsNonRoot: true, runAsUser: 65532, capabilities: {drop: ["ALL"]}, seccompProfile: {type: RuntimeDefault}}
---
apiVersion: core.openfeature.dev/v1beta1
kind: FeatureFlagSource
metadata: {name: shop-stream, namespace: %[1]s}
spec:
  sources: [{source: shop-flags, provider: flagd-proxy}]
  targetRefs: [{group: apps, kind: Deployment, name: shop-api}]
`

// addStreamingWorkload applies demoStreaming and waits until its pod's
// flagd has subscribed: the FeatureFlag's status counts the namespace's
// sync subscribers.
func (d *demo) addStreamingWorkload(ctx context.Context) error {
	ns := d.o.namespace
	d.step("A second workload, whose flagd streams shop-flags from flagplane's sync server (provider flagd-proxy)")
	manifest := fmt.Sprintf(demoStreaming, ns)
	if out, err := d.kubectl([]byte(manifest), "apply", "--server-side", "-f", "-"); err != nil {
		return fmt.Errorf("applying the streaming workload: %w: %s", err, out)
	}
	d.say("$ kubectl apply -f shop-api.yaml   (Deployment shop-api; FeatureFlagSource shop-stream: shop-flags with provider flagd-proxy)")
	ff, err := d.delivered(ctx, "")
	if err != nil {
		return fmt.Errorf("waiting for shop-api's flagd to subscribe: %w", err)
	}
	d.revisionBefore = ff.Status.Revision
	d.say("its pod's flagd subscribed to shop-flags on the sync server")
	return nil
}

// delivered waits until shop-flags' status is at a revision other than
// before, every consumer holds it and the sync subscribers are among them,
// and returns the FeatureFlag.
func (d *demo) delivered(ctx context.Context, before string) (*v1beta1.FeatureFlag, error) {
	key := client.ObjectKey{Namespace: d.o.namespace, Name: "shop-flags"}
	ff := &v1beta1.FeatureFlag{}
	err := d.poll(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		if err := d.cp.Client.Get(ctx, key, ff); err != nil {
			return false, err
		}
		st := ff.Status
		if st.Revision == "" || st.Revision == before || len(st.Consumers) == 0 {
			return false, nil
		}
		streaming := false
		for _, c := range st.Consumers {
			if c.Revision != st.Revision {
				return false, nil
			}
			streaming = streaming || (c.Kind == status.KindSyncSubscribers && c.Streams > 0)
		}
		ready := meta.FindStatusCondition(st.Conditions, v1beta1.ConditionReady)
		return streaming && ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == ff.Generation, nil
	})
	return ff, err
}

// showDelivery shows, after the edit, that every consumer flagplane can
// observe holds the new revision, and says what it cannot observe.
func (d *demo) showDelivery(ctx context.Context) error {
	ns := d.o.namespace
	d.step("Did the edit arrive everywhere? (FeatureFlag delivery status)")
	ff, err := d.delivered(ctx, d.revisionBefore)
	if err != nil {
		return fmt.Errorf("waiting for the delivery status: %w", err)
	}
	d.measured("flag edit to the status saying every consumer has it and every asked pod serves it", time.Since(d.editedAt))
	out, err := d.kubectl(nil, "get", "featureflags", "-n", ns, "-o", "wide")
	if err != nil {
		return err
	}
	d.say("$ kubectl get featureflags -n %s -o wide", ns)
	d.block(out)
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tREVISION\tSINCE\tSTREAMS")
	for _, c := range ff.Status.Consumers {
		since, streams := "", ""
		if c.Since != nil {
			since = c.Since.UTC().Format(time.RFC3339)
		}
		if c.Kind == status.KindSyncSubscribers {
			streams = fmt.Sprintf("%d/%d current", c.Current, c.Streams)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Kind, c.Namespace, c.Name, c.Revision, since, streams)
	}
	_ = tw.Flush()
	d.say("status.consumers (revision %s):", ff.Status.Revision)
	d.block(b.String())
	b.Reset()
	tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tREVISION\tPODS\tCONFIRMED\tNOT ASKED")
	for _, s := range ff.Status.Serving {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\n", s.Namespace, s.Revision, s.Pods, s.Confirmed, s.NotAsked)
	}
	_ = tw.Flush()
	d.say("status.serving, what the pods' flagd answer when flagplane asks them (confirmed %s):", ff.Status.Confirmed)
	d.block(b.String())
	if u := ff.Status.Unobserved; u != nil {
		who := nouns(u.Workloads, "workload") + " and " + nouns(u.Flagds, "Flagd")
		if u.InProcess > 0 {
			who = nouns(u.Workloads, "workload") + ", " + nouns(u.Flagds, "Flagd") + " and " + nouns(u.InProcess, "in-process workload")
		}
		d.say("status.unobserved, not counted: %s, because %s", who, u.Reason)
	}
	d.say("A copy counts in consumers when it holds the revision; Ready waits until the pods' flagd answer with it.")
	return nil
}

func nouns(n int32, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
