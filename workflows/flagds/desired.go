package flagds

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	gatewayapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/flagplane/flagplane/api/v1beta1"
	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows"
	"github.com/flagplane/flagplane/workflows/flagdversion"
	"github.com/flagplane/flagplane/workflows/injection"
)

// A Flagd's generated objects, all named like the Flagd, in its namespace,
// labelled as the OpenFeature Operator labels them (app, app.kubernetes.io/
// name, app.kubernetes.io/version) with app.kubernetes.io/managed-by the
// manager's --managed-by (flagplane, or the OpenFeature Operator's
// open-feature-operator), owned by the Flagd (so that Kubernetes deletes
// them with it):
//
//   - a Deployment of flagd, whose container is the sidecar's — the same
//     code (sidecarMerge) over the same inputs (the FeatureFlagSource's
//     settings and entries, the operator's defaults) — as a regular
//     container with the OpenFeature Operator's port names (management,
//     flagd, ofrep, sync), mounting the generated ConfigMaps of its file
//     entries;
//   - a Service selecting its pods (app: <name>) with the ports flagd,
//     ofrep, sync and metrics at the operator's port numbers
//     (Options), each targeting the port flagd really listens on (the
//     source's, where it sets one: the OpenFeature Operator targets the
//     operator's numbers whatever flagd listens on);
//   - an Ingress, when spec.ingress.enabled: one rule per host with the
//     flagd, OFREP and sync paths;
//   - an HTTPRoute (gateway.networking.k8s.io/v1), when
//     spec.gatewayApiRoutes.enabled: the same three paths as prefixes.
//
// The labels and annotations of spec.labels and spec.annotations go on all
// of them (and the pods); the Service also gets the Flagd's own annotations
// (as in the OpenFeature Operator), the Ingress spec.ingress.annotations,
// the HTTPRoute spec.gatewayApiRoutes.annotations. A GitOps tool's keys
// (workflows.GitOpsKey) never go on any of them, from wherever they come:
// the Flagd itself is the tool's, its objects are not.

// Labels of a Flagd's objects, besides app.kubernetes.io/managed-by.
const (
	LabelApp     = "app"
	LabelName    = "app.kubernetes.io/name"
	LabelVersion = "app.kubernetes.io/version"
)

// The OpenFeature Operator's default paths of flagd's APIs.
const (
	DefaultEvaluationPath = "/flagd.evaluation.v1.Service"
	DefaultOFREPPath      = "/ofrep"
	DefaultSyncPath       = "/flagd.sync.v1.Service"
)

// Names of the APIs flagd serves, as a Flagd's status and Service name them.
const (
	APIEvaluation = "flagd"
	APIOFREP      = "ofrep"
	APISync       = "sync"
	APIManagement = "management"
)

// HTTPRouteGVK is the kind of a Flagd's route.
var HTTPRouteGVK = schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"}

// lastAppliedAnnotation is kubectl's, which is not copied from a Flagd to its Service.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// Objects is what the graph wants for a Flagd.
type Objects struct {
	Flagd topology.Key
	// Source is the FeatureFlagSource it names and SourceState whether that
	// reference resolves.
	Source      topology.Key
	SourceState topology.RefState
	// Invalid lists what is wrong with the spec; then nothing is generated.
	Invalid field.ErrorList
	// Deployment and Service are nil when Invalid, when the source does not
	// resolve, or when none of its entries can be served (Unservable): then
	// the objects that exist are left as they are, and the pods keep
	// serving what they have.
	Deployment *appsv1.Deployment
	Service    *corev1.Service
	// Ingress and HTTPRoute are nil when not enabled (or not generated).
	Ingress   *networkingv1.Ingress
	HTTPRoute *unstructured.Unstructured
	// IngressWanted and HTTPRouteWanted say whether they are enabled, even
	// when nothing is generated.
	IngressWanted, HTTPRouteWanted bool
	// Unservable says why no entry of the source can be served.
	Unservable string
	// TooLarge says which flag sets it reads from a ConfigMap are larger
	// than a ConfigMap holds (topology.Overflow's message): its pods keep
	// the last content that fitted.
	TooLarge []string
	// ConfigMaps are the generated ConfigMaps the Deployment mounts: they
	// must exist before it is written.
	ConfigMaps []topology.Key
	// Endpoints are where the generated objects serve flagd's APIs.
	Endpoints []v1beta1.FlagdEndpoint
	// Warnings say what of the source was left out, and why.
	Warnings []string
	// Release is the flagd release the Deployment runs; FlagdVersionGaps
	// what of the source it cannot take (left out, among the Warnings).
	Release          flagdversion.Injected
	FlagdVersionGaps []injection.VersionGap
}

// Validate reports what in a Flagd's spec cannot be generated.
func Validate(f *v1beta1.Flagd) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	ref := f.Spec.FeatureFlagSource
	ns, name, ok := topology.ParseRef(ref, f.Namespace)
	switch {
	case ref == "":
		errs = append(errs, field.Required(spec.Child("featureFlagSource"), "the FeatureFlagSource to run"))
	case !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0:
		errs = append(errs, field.Invalid(spec.Child("featureFlagSource"), ref, "must be `name` or `namespace/name` of a FeatureFlagSource"))
	}
	if f.Spec.Replicas != nil && *f.Spec.Replicas < 0 {
		errs = append(errs, field.Invalid(spec.Child("replicas"), *f.Spec.Replicas, "must not be negative"))
	}
	if f.Spec.ServiceType == corev1.ServiceTypeExternalName {
		errs = append(errs, field.NotSupported(spec.Child("serviceType"), f.Spec.ServiceType,
			[]string{string(corev1.ServiceTypeClusterIP), string(corev1.ServiceTypeNodePort), string(corev1.ServiceTypeLoadBalancer)}))
	}
	if len(validation.IsDNS1035Label(f.Name)) > 0 {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), f.Name,
			"names the Service too, which must be a DNS label starting with a letter"))
	}
	if sa := f.Spec.ServiceAccountName; sa != "" && len(validation.IsDNS1123Subdomain(sa)) > 0 {
		errs = append(errs, field.Invalid(spec.Child("serviceAccountName"), sa,
			"names the service account of the pods and of a RoleBinding, which must be a DNS subdomain"))
	}
	for _, k := range slices.Sorted(maps.Keys(f.Spec.Labels)) {
		path := spec.Child("labels").Key(k)
		if slices.Contains([]string{LabelApp, LabelName, LabelVersion, v1beta1.LabelManagedBy}, k) {
			errs = append(errs, field.Forbidden(path, "flagplane sets this label itself"))
		}
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(path, k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(f.Spec.Labels[k]) {
			errs = append(errs, field.Invalid(path, f.Spec.Labels[k], msg))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(f.Spec.Annotations)) {
		for _, msg := range validation.IsQualifiedName(strings.ToLower(k)) {
			errs = append(errs, field.Invalid(spec.Child("annotations").Key(k), k, msg))
		}
	}
	switch pt := f.Spec.Ingress.PathType; pt {
	case "", networkingv1.PathTypeExact, networkingv1.PathTypePrefix, networkingv1.PathTypeImplementationSpecific:
	default:
		errs = append(errs, field.NotSupported(spec.Child("ingress", "pathType"), pt,
			[]string{string(networkingv1.PathTypeExact), string(networkingv1.PathTypePrefix), string(networkingv1.PathTypeImplementationSpecific)}))
	}
	return errs
}

// Desired computes a Flagd's objects from the graph and the
// operator's options. It reads no cluster state. It returns nil for a
// Flagd that is not in the graph.
func Desired(v *topology.View, key topology.Key, opts Options) *Objects {
	f, ok := v.Flagd(key)
	if !ok {
		return nil
	}
	out := &Objects{Flagd: key, Release: opts.Flagd(),
		IngressWanted: f.Spec.Ingress.Enabled, HTTPRouteWanted: f.Spec.GatewayApiRoutes.Enabled}
	out.Source, out.SourceState, _ = v.FlagdSource(key)
	if out.Invalid = Validate(f); len(out.Invalid) > 0 || out.SourceState != topology.RefResolved {
		return out
	}
	io := opts.sidecarOptions()

	// The sidecar's container, over this one source.
	sc := injection.ContainerOfSource(v, key, out.Source, io)
	out.Warnings, out.Release, out.FlagdVersionGaps = sc.Warnings, sc.Flagd, sc.FlagdVersionGaps
	if sc.Container == nil {
		out.Unservable = "none of the entries of FeatureFlagSource " + out.Source.Namespace + "/" + out.Source.Name + " can be served"
		return out
	}
	out.ConfigMaps = sc.ConfigMaps
	out.TooLarge = tooLargeForConfigMaps(v, sc.ConfigMaps)
	ports := regularContainer(sc, opts)

	labels := flagdLabels(f, io.Sidecar.Tag, opts.Generated)
	owner := flagdOwner(f)
	out.Deployment = desiredDeployment(f, sc, io.Sidecar.ImagePullSecrets, labels, owner, opts.Generated)
	out.Service = desiredService(f, labels, owner, ports, opts)
	out.Endpoints = serviceEndpoints(f, opts)
	if f.Spec.Ingress.Enabled {
		out.Ingress = desiredIngress(f, labels, owner, opts)
		out.Endpoints = append(out.Endpoints, ingressEndpoints(out.Ingress, opts)...)
	}
	if f.Spec.GatewayApiRoutes.Enabled {
		route := desiredHTTPRoute(f, labels, owner, opts)
		out.Endpoints = append(out.Endpoints, routeEndpoints(f, route, opts)...)
		out.HTTPRoute = toUnstructured(route)
	}
	if len(out.Endpoints) > 64 {
		out.Endpoints = out.Endpoints[:64]
	}
	return out
}

// tooLargeForConfigMaps says which of the flag sets read from the generated
// ConfigMaps cms are larger than a ConfigMap holds.
func tooLargeForConfigMaps(v *topology.View, cms []topology.Key) []string {
	var out []string
	for _, cm := range cms {
		if r, ok := v.FlagSetRendered(cm.FlagSet()); ok {
			if o, over := r.Overflow(string(v1beta1.SyncProviderFile)); over {
				out = append(out, o.Message(cm.FlagSet()))
			}
		}
	}
	return out
}

// regularContainer makes sc's container, the sidecar's, a regular
// container with the OpenFeature Operator's port names, and returns the
// ports flagd listens on.
func regularContainer(sc injection.SourceContainer, opts Options) flagdPorts {
	c := sc.Container
	c.RestartPolicy = nil
	ports := flagdPorts{
		evaluation: sc.Port,
		management: sc.ManagementPort,
		ofrep:      cmp.Or(sc.OFREPPort, opts.OFREPPort),
		sync:       opts.SyncPort,
	}
	// Every flagd release flagplane vouches for takes --ofrep-port and
	// --sync-port (flagdversion; TestEveryVouchedRelease checks).
	if sc.OFREPPort == 0 && ports.ofrep != injection.DefaultOFREPPort {
		c.Args = append(c.Args, "--ofrep-port", strconv.Itoa(int(ports.ofrep)))
	}
	if ports.sync != DefaultSyncPort {
		c.Args = append(c.Args, "--sync-port", strconv.Itoa(int(ports.sync)))
	}
	c.Ports = []corev1.ContainerPort{
		{Name: "management", ContainerPort: ports.management, Protocol: corev1.ProtocolTCP},
		{Name: "flagd", ContainerPort: ports.evaluation, Protocol: corev1.ProtocolTCP},
		{Name: "ofrep", ContainerPort: ports.ofrep, Protocol: corev1.ProtocolTCP},
		{Name: "sync", ContainerPort: ports.sync, Protocol: corev1.ProtocolTCP},
	}
	return ports
}

// desiredDeployment runs sc's container, made regular (regularContainer), in
// pods labelled like the Flagd's objects.
func desiredDeployment(f *v1beta1.Flagd, sc injection.SourceContainer, pullSecretNames []string, labels map[string]string,
	owner []metav1.OwnerReference, gen workflows.GeneratedMetadata) *appsv1.Deployment {
	podAnnotations := flagdAnnotations(f, gen)
	// The mark the OpenFeature Operator puts on pods whose flagd reads
	// FeatureFlags itself, as the sidecar's pods get it.
	maps.Copy(podAnnotations, sc.PodAnnotations)
	var pullSecrets []corev1.LocalObjectReference
	for _, s := range pullSecretNames {
		pullSecrets = append(pullSecrets, corev1.LocalObjectReference{Name: s})
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: flagdMeta(f, labels, flagdAnnotations(f, gen), owner),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(ptr.Deref(f.Spec.Replicas, 1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelApp: f.Name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels), Annotations: nilIfEmpty(podAnnotations)},
				Spec: corev1.PodSpec{
					ServiceAccountName: f.Spec.ServiceAccountName,
					Containers:         []corev1.Container{*sc.Container},
					Volumes:            sc.Volumes,
					ImagePullSecrets:   pullSecrets,
				},
			},
		},
	}
}

// desiredService selects the Flagd's pods, with the operator's port numbers
// targeting the ports flagd listens on. It carries the Flagd's own
// annotations too, but kubectl's last-applied one.
func desiredService(f *v1beta1.Flagd, labels map[string]string, owner []metav1.OwnerReference, ports flagdPorts, opts Options) *corev1.Service {
	annotations := flagdAnnotations(f, opts.Generated)
	for k, val := range f.Annotations {
		if k != lastAppliedAnnotation {
			annotations[k] = val
		}
	}
	maps.Copy(annotations, f.Spec.Annotations)
	workflows.DropGitOpsKeys(annotations)
	serviceType := f.Spec.ServiceType
	if serviceType == "" {
		serviceType = corev1.ServiceTypeClusterIP
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: flagdMeta(f, labels, annotations, owner),
		Spec: corev1.ServiceSpec{
			Type:     serviceType,
			Selector: map[string]string{LabelApp: f.Name},
			Ports: []corev1.ServicePort{
				servicePort(APIEvaluation, "grpc", opts.Port, ports.evaluation),
				servicePort(APIOFREP, "http", opts.OFREPPort, ports.ofrep),
				servicePort(APISync, "grpc", opts.SyncPort, ports.sync),
				servicePort("metrics", "http", opts.ManagementPort, ports.management),
			},
		},
	}
}

// serviceEndpoints are the APIs the Flagd's Service serves, at its
// cluster-local host name.
func serviceEndpoints(f *v1beta1.Flagd, opts Options) []v1beta1.FlagdEndpoint {
	var out []v1beta1.FlagdEndpoint
	host := f.Name + "." + f.Namespace + ".svc"
	for _, e := range []struct {
		api  string
		port int32
	}{{APIEvaluation, opts.Port}, {APIOFREP, opts.OFREPPort}, {APISync, opts.SyncPort}, {APIManagement, opts.ManagementPort}} {
		out = append(out, v1beta1.FlagdEndpoint{API: e.api, Kind: "Service", Host: host, Port: e.port})
	}
	return out
}

// ingressEndpoints are the APIs an Ingress serves: one per host and path.
func ingressEndpoints(ing *networkingv1.Ingress, opts Options) []v1beta1.FlagdEndpoint {
	var out []v1beta1.FlagdEndpoint
	for _, r := range ing.Spec.Rules {
		for _, path := range r.HTTP.Paths {
			out = append(out, v1beta1.FlagdEndpoint{API: apiOfPort(path.Backend.Service.Port.Number, opts), Kind: "Ingress", Host: r.Host, Path: path.Path})
		}
	}
	return out
}

// routeEndpoints are the APIs an HTTPRoute serves: one per host (or none
// named) and rule.
func routeEndpoints(f *v1beta1.Flagd, route *gatewayapiv1.HTTPRoute, opts Options) []v1beta1.FlagdEndpoint {
	var out []v1beta1.FlagdEndpoint
	hosts := f.Spec.GatewayApiRoutes.Hosts
	if len(hosts) == 0 {
		hosts = []string{""}
	}
	for _, h := range hosts {
		for _, r := range route.Spec.Rules {
			out = append(out, v1beta1.FlagdEndpoint{API: apiOfPort(int32(*r.BackendRefs[0].Port), opts), Kind: "HTTPRoute",
				Host: h, Path: *r.Matches[0].Path.Value})
		}
	}
	return out
}

// flagdPorts are the ports flagd listens on.
type flagdPorts struct{ evaluation, management, ofrep, sync int32 }

func servicePort(name, appProtocol string, port, target int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, AppProtocol: ptr.To(appProtocol), Protocol: corev1.ProtocolTCP,
		Port: port, TargetPort: intstr.FromInt32(target)}
}

func apiOfPort(port int32, opts Options) string {
	switch port {
	case opts.OFREPPort:
		return APIOFREP
	case opts.SyncPort:
		return APISync
	}
	return APIEvaluation
}

// flagdOwnLabels are the labels flagplane sets on a Flagd's objects besides
// app.kubernetes.io/managed-by.
func flagdOwnLabels(f *v1beta1.Flagd, tag string) map[string]string {
	l := map[string]string{LabelApp: f.Name, LabelName: f.Name}
	if tag != "" && len(validation.IsValidLabelValue(tag)) == 0 {
		l[LabelVersion] = tag
	}
	return l
}

// flagdLabels: the operator's --labels, then spec.labels, then flagplane's
// own; never a GitOps tool's.
func flagdLabels(f *v1beta1.Flagd, tag string, gen workflows.GeneratedMetadata) map[string]string {
	l := gen.ObjectLabels()
	for k, val := range f.Spec.Labels {
		if k != v1beta1.LabelManagedBy && !workflows.GitOpsKey(k) {
			l[k] = val
		}
	}
	maps.Copy(l, flagdOwnLabels(f, tag))
	maps.Copy(l, gen.ManagedLabels())
	return l
}

// flagdAnnotations: the operator's --annotations, then spec.annotations;
// never a GitOps tool's.
func flagdAnnotations(f *v1beta1.Flagd, gen workflows.GeneratedMetadata) map[string]string {
	a := gen.ObjectAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	maps.Copy(a, f.Spec.Annotations)
	return workflows.DropGitOpsKeys(a)
}

func flagdOwner(f *v1beta1.Flagd) []metav1.OwnerReference {
	if f.UID == "" {
		return nil
	}
	return []metav1.OwnerReference{{APIVersion: v1beta1.GroupVersion.String(), Kind: v1beta1.FlagdKind,
		Name: f.Name, UID: f.UID, Controller: ptr.To(true)}}
}

func flagdMeta(f *v1beta1.Flagd, labels, annotations map[string]string, owner []metav1.OwnerReference) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: f.Name, Namespace: f.Namespace, Labels: maps.Clone(labels),
		Annotations: nilIfEmpty(annotations), OwnerReferences: owner}
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

func desiredIngress(f *v1beta1.Flagd, labels map[string]string, owner []metav1.OwnerReference, opts Options) *networkingv1.Ingress {
	spec := f.Spec.Ingress
	annotations := flagdAnnotations(f, opts.Generated)
	maps.Copy(annotations, spec.Annotations)
	workflows.DropGitOpsKeys(annotations)
	pathType := networkingv1.PathTypePrefix
	if spec.PathType != "" {
		pathType = spec.PathType
	}
	hosts := spec.Hosts
	if len(hosts) == 0 {
		hosts = []string{""}
	}
	backend := func(port int32) networkingv1.IngressBackend {
		return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
			Name: f.Name, Port: networkingv1.ServiceBackendPort{Number: port}}}
	}
	var rules []networkingv1.IngressRule
	for _, h := range hosts {
		rules = append(rules, networkingv1.IngressRule{Host: h, IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
				{Path: cmp.Or(spec.FlagdPath, DefaultEvaluationPath), PathType: ptr.To(pathType), Backend: backend(opts.Port)},
				{Path: cmp.Or(spec.OFREPPath, DefaultOFREPPath), PathType: ptr.To(pathType), Backend: backend(opts.OFREPPort)},
				{Path: cmp.Or(spec.SyncPath, DefaultSyncPath), PathType: ptr.To(pathType), Backend: backend(opts.SyncPort)},
			}},
		}})
	}
	return &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: flagdMeta(f, labels, annotations, owner),
		Spec: networkingv1.IngressSpec{
			IngressClassName: spec.IngressClassName,
			TLS:              spec.TLS,
			Rules:            rules,
		},
	}
}

func desiredHTTPRoute(f *v1beta1.Flagd, labels map[string]string, owner []metav1.OwnerReference, opts Options) *gatewayapiv1.HTTPRoute {
	spec := f.Spec.GatewayApiRoutes
	annotations := flagdAnnotations(f, opts.Generated)
	maps.Copy(annotations, spec.Annotations)
	workflows.DropGitOpsKeys(annotations)
	rule := func(path string, port int32) gatewayapiv1.HTTPRouteRule {
		return gatewayapiv1.HTTPRouteRule{
			Matches: []gatewayapiv1.HTTPRouteMatch{{Path: &gatewayapiv1.HTTPPathMatch{
				Type: ptr.To(gatewayapiv1.PathMatchPathPrefix), Value: ptr.To(path)}}},
			BackendRefs: []gatewayapiv1.HTTPBackendRef{{BackendRef: gatewayapiv1.BackendRef{
				BackendObjectReference: gatewayapiv1.BackendObjectReference{
					Kind:      ptr.To(gatewayapiv1.Kind("Service")),
					Namespace: ptr.To(gatewayapiv1.Namespace(f.Namespace)),
					Name:      gatewayapiv1.ObjectName(f.Name),
					Port:      ptr.To(gatewayapiv1.PortNumber(port)),
				}}}},
		}
	}
	var hostnames []gatewayapiv1.Hostname
	for _, h := range spec.Hosts {
		hostnames = append(hostnames, gatewayapiv1.Hostname(h))
	}
	// One HTTPRoute for every API, as the OpenFeature Operator makes it:
	// flagd's gRPC APIs are served as HTTP too (Connect), which a
	// GRPCRoute would not route.
	return &gatewayapiv1.HTTPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: HTTPRouteGVK.GroupVersion().String(), Kind: HTTPRouteGVK.Kind},
		ObjectMeta: flagdMeta(f, labels, annotations, owner),
		Spec: gatewayapiv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayapiv1.CommonRouteSpec{ParentRefs: spec.ParentRefs},
			Hostnames:       hostnames,
			Rules: []gatewayapiv1.HTTPRouteRule{
				rule(DefaultOFREPPath, opts.OFREPPort),
				rule(DefaultEvaluationPath, opts.Port),
				rule(DefaultSyncPath, opts.SyncPort),
			},
		},
	}
}

// toUnstructured converts a generated object for server-side apply and for
// comparison with what the cluster holds: without status, and without the
// fields that a typed object cannot leave out (a zero creationTimestamp).
func toUnstructured(obj runtime.Object) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(fmt.Sprintf("converting a generated %T: %v", obj, err)) // plain API types: cannot fail
	}
	delete(m, "status")
	pruneNil(m)
	return &unstructured.Unstructured{Object: m}
}

// pruneNil removes map entries whose value is nil, and maps left empty by it.
func pruneNil(m map[string]any) {
	for k, val := range m {
		switch val := val.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			pruneNil(val)
			if len(val) == 0 {
				delete(m, k)
			}
		case []any:
			for _, e := range val {
				if em, ok := e.(map[string]any); ok {
					pruneNil(em)
				}
			}
		}
	}
}
