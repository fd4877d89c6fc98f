package webhooks

import (
	"context"
	"encoding/json"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// loggedDecisions logs every decision of an admission handler, so that
// whoever wonders whether the webhook was called, and what it decided,
// can see it: an allowed request at V(1) (the manager's
// --zap-log-level=debug), a denied one at V(0). The handler's response
// message says what was injected or why not.
type loggedDecisions struct {
	admission.Handler
}

var _ admission.Handler = loggedDecisions{}

// Handle implements admission.Handler.
func (l loggedDecisions) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp := l.Handler.Handle(ctx, req)
	// Warnings name users' references, keys and names, which kubectl
	// prints as they are: escaped, what a terminal would act on.
	resp.Warnings = readableWarnings(resp.Warnings)
	logDecision(log.FromContext(ctx), req, resp)
	return resp
}

// logDecision logs one decision; an allowed one costs nothing unless V(1)
// is enabled.
func logDecision(logger logr.Logger, req admission.Request, resp admission.Response) {
	if resp.Allowed && !logger.V(1).Enabled() {
		return
	}
	// The object under its kind, as namespace/name (workflows.LogKey); the
	// kind alone too, to find every decision about a kind.
	kv := []any{"kind", req.Kind.Kind, req.Kind.Kind, klog.KRef(req.Namespace, req.Name)}
	if req.Name == "" {
		if generateName := generateNameOf(req); generateName != "" {
			kv = append(kv, "generateName", generateName) // a pod of a ReplicaSet or DaemonSet
		}
	}
	kv = append(kv, "operation", string(req.Operation), "dryRun", req.DryRun != nil && *req.DryRun,
		"user", req.UserInfo.Username, "allowed", resp.Allowed)
	if resp.Result != nil && resp.Result.Message != "" {
		kv = append(kv, "reason", resp.Result.Message)
	}
	if resp.Result != nil && !resp.Allowed {
		kv = append(kv, "code", resp.Result.Code)
	}
	if len(resp.Patches) > 0 {
		kv = append(kv, "patches", len(resp.Patches))
	}
	if len(resp.Warnings) > 0 {
		kv = append(kv, "warnings", resp.Warnings)
	}
	if !resp.Allowed {
		logger.Info("admission denied", kv...)
		return
	}
	logger.V(1).Info("admission allowed", kv...)
}

// generateNameOf reads metadata.generateName of the request's object.
func generateNameOf(req admission.Request) string {
	var obj struct {
		Metadata struct {
			GenerateName string `json:"generateName"`
		} `json:"metadata"`
	}
	if json.Unmarshal(req.Object.Raw, &obj) != nil {
		return ""
	}
	return obj.Metadata.GenerateName
}

// requestLogger is the webhooks' LogConstructor: the request's ID only, as
// logDecision names the object (controller-runtime's default would name it
// twice).
func requestLogger(base logr.Logger, req *admission.Request) logr.Logger {
	if req == nil {
		return base
	}
	return base.WithValues("requestID", req.UID)
}
