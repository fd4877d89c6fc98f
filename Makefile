# flagplane — build, generate, test.
#
# Everything the tests need is built here from Go modules, into bin/ (git-ignored):
# controller-gen, etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl. Each binary is
# built once per machine and rebuilt when its pinned version changes.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

BIN := $(CURDIR)/bin
export GOFLAGS := -buildvcs=false

# Pinned tool versions. The control plane's pins live in the wrapper modules
# under hack/tools, and are read from there so that one edit bumps them.
CONTROLLER_GEN_VERSION := v0.23.0
KUBE_VERSION := $(shell awk '$$1=="require" && $$2=="k8s.io/kubernetes" {print $$3}' hack/tools/kube/go.mod)
ETCD_VERSION := $(shell awk '$$1=="require" && $$2=="go.etcd.io/etcd/server/v3" {print $$3}' hack/tools/etcd/go.mod)
KUBE_MINOR := $(word 2,$(subst ., ,$(KUBE_VERSION)))
# The real clients of test/realclients: flagd, and the OpenFeature SDK with
# flagd's provider (a module of its own, so that its pins never touch ours).
FLAGD_VERSION := $(shell awk '$$1=="require" && $$2=="github.com/open-feature/flagd/flagd" {print $$3}' hack/tools/flagd/go.mod)
SDKCLIENT_DIR := test/realclients/sdkclient
OPENFEATURE_SDK_VERSION := $(shell awk '$$1=="github.com/open-feature/go-sdk" {print $$2}' $(SDKCLIENT_DIR)/go.mod)
FLAGD_PROVIDER_VERSION := $(shell awk '$$1=="github.com/open-feature/go-sdk-contrib/providers/flagd" {print $$2}' $(SDKCLIENT_DIR)/go.mod)

# Gateway API's own CRD files (ReferenceGrant, HTTPRoute, ...), which the
# suites install as a cluster with Gateway API has them. v1.7.0 declares go
# 1.27.0, so the go command downloads that toolchain from the module proxy to
# download the module; nothing else uses it.
GATEWAY_API_VERSION := v1.7.0
GATEWAY_API_GO := go1.27.0
GATEWAY_API_STAMP := $(BIN)/.gateway-api-$(GATEWAY_API_VERSION)

CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
ETCD_STAMP := $(BIN)/.etcd-$(ETCD_VERSION)
KUBE_STAMP := $(BIN)/.kube-$(KUBE_VERSION)
KUBECTL_STAMP := $(BIN)/.kubectl-$(KUBE_VERSION)
KUBE_SCHEDULER_STAMP := $(BIN)/.kube-scheduler-$(KUBE_VERSION)
FLAGD_STAMP := $(BIN)/.flagd-$(FLAGD_VERSION)
SDKCLIENT_STAMP := $(BIN)/.sdkclient-$(OPENFEATURE_SDK_VERSION)-$(FLAGD_PROVIDER_VERSION)

# Tests find the control plane through envtest's variable.
export KUBEBUILDER_ASSETS := $(BIN)

GINKGO_FLAGS ?=
TEST_TIMEOUT ?= 30m
BENCH_TIME ?= 1x
# Each fan-out run makes 10 edits one at a time and a burst of 10 per size.
FANOUT_BENCH_TIME ?= 1x
# FeatureFlag edits per provider in the edit-to-served benchmark (test/e2e).
E2E_BENCH_EDITS ?= 20
# hack/e2ebench: e.g. -edits 100, -sizes 10,1000, -strict.
E2E_BENCH_FLAGS ?=

##@ General

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} \
	  /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-22s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs (config/crd/bases) and RBAC (config/rbac/role.yaml) from the markers of every package.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=flagplane-manager paths=./... output:rbac:artifacts:config=config/rbac

.PHONY: verify-generated
verify-generated: generate manifests ## Fail when generated code or manifests differ from what is committed.
	@changed=$$(git status --porcelain -- api config); \
	if [ -n "$$changed" ]; then \
	  echo "generated files differ from what is committed: run 'make generate manifests' and commit the result" >&2; \
	  echo "$$changed" >&2; git --no-pager diff -- api config | head -40 >&2; exit 1; fi

.PHONY: fmt
fmt: ## Format the Go code.
	go fmt ./...

.PHONY: vet
vet: ## Vet the Go code.
	go vet ./...

.PHONY: install-crds
install-crds: ## Apply the CRDs to the cluster of the current kubeconfig.
	$(or $(shell command -v kubectl),$(BIN)/kubectl) apply --server-side -f config/crd/bases

.PHONY: build
build: ## Build the flagplane binaries into bin/: manager (the operator) and flagplane (the CLI: topology dumps).
	go build -o $(BIN)/ ./cmd/...

##@ Try it

DEMO_FLAGS ?=

.PHONY: demo
demo: ## Start a local control plane, run flagplane on config/samples and show what it does (builds what is missing; Ctrl-C stops; DEMO_FLAGS=-hold=10m).
	@mkdir -p $(BIN)
	@echo ">> compiling the demo into bin/flagplane-demo (a first build compiles client-go, controller-runtime and envtest: a few minutes on 2 cores)"
	@go build -o $(BIN)/flagplane-demo ./hack/demo & pid=$$!; s=0; \
	  while kill -0 $$pid 2>/dev/null; do sleep 1; s=$$((s+1)); \
	    if [ $$((s % 30)) -eq 0 ]; then echo "   ... still compiling the demo ($${s}s)"; fi; done; \
	  wait $$pid
	@$(BIN)/flagplane-demo $(DEMO_FLAGS)

.PHONY: docs-topology
docs-topology: ## Re-render docs/topology.dot and docs/topology.svg (the README's picture) from the demo.
	go run ./hack/demo -hold=0 -out docs

##@ Tests

.PHONY: test
test: verify-generated vet controlplane test-unit test-integration ## Everything: generated-file check, vet, unit and integration tests.

# Packages under test/ that need no control plane (plain Go tests): they
# run with the unit tests.
TEST_LIBRARIES := ./test/faultproxy
# Ginkgo suites run with the race detector: the reconcile path (informer
# callbacks, queues, graph snapshots read while written) and its API-call
# accounting. The others run without it, to keep CI's time in proportion.
RACE_SUITES := ./test/reconcile ./test/accounting

.PHONY: test-unit
test-unit: ## Unit, golden and property tests of the pure packages, with the race detector.
	go test -race -count=1 -timeout $(TEST_TIMEOUT) $$(go list ./... | grep -v /test/) $(TEST_LIBRARIES)

.PHONY: test-integration
test-integration: controlplane realclients ## Ginkgo suites on the real local control plane (and real flagd and OpenFeature clients); RACE_SUITES with the race detector.
	go test -race -count=1 -timeout $(TEST_TIMEOUT) $(RACE_SUITES) -ginkgo.v $(GINKGO_FLAGS)
	go test -count=1 -timeout $(TEST_TIMEOUT) $$(go list $(addsuffix /...,./test) | grep -v $(foreach p,$(RACE_SUITES) $(TEST_LIBRARIES),-e '$(patsubst ./%,/%,$(p))$$')) -ginkgo.v $(GINKGO_FLAGS)

.PHONY: bench
bench: controlplane realclients ## Benchmarks: topology per-event cost against graph size and a full rebuild; sync server fan-out (edit to receipt by 100, 1k, 10k subscribers); end to end on the control plane (edit to ConfigMap at 10 to 10k workloads, start-up with 10k workloads and 1k flag sets); FeatureFlag edit to flagd serving it, per provider, through the test node.
	go run ./hack/benchtable -benchtime $(BENCH_TIME)
	go test ./syncserver -run '^$$' -bench FanOut -benchtime $(FANOUT_BENCH_TIME) -timeout $(TEST_TIMEOUT)
	go run ./hack/e2ebench $(E2E_BENCH_FLAGS)
	FLAGPLANE_E2E_BENCH_EDITS=$(E2E_BENCH_EDITS) go test ./test/e2e -run '^$$' -bench EditToServed -benchtime 1x -timeout $(TEST_TIMEOUT)

.PHONY: fuzz
fuzz: ## Run the fuzz targets for longer (FUZZTIME each, default 60s).
	go test ./topology -run '^$$' -fuzz FuzzIncrementalEqualsRebuild -fuzztime $${FUZZTIME:-60s}

##@ Real clients (built from Go modules into bin/)

.PHONY: realclients
realclients: $(FLAGD_STAMP) $(SDKCLIENT_STAMP) ## Build flagd and the OpenFeature SDK client that test/realclients runs.

# flagd's own modules are not in the checksum database; go.sum pins them.
$(FLAGD_STAMP): hack/tools/flagd/go.mod hack/tools/flagd/tools.go
	@mkdir -p $(BIN)
	@echo ">> building flagd $(FLAGD_VERSION) (about 2 minutes cold)"
	cd hack/tools/flagd && GONOSUMDB=github.com/open-feature/flagd go build -trimpath \
	  -ldflags "-s -w -X main.version=$(FLAGD_VERSION)" -o $(BIN)/flagd github.com/open-feature/flagd/flagd
	@rm -f $(BIN)/.flagd-* && touch $@

$(SDKCLIENT_STAMP): $(SDKCLIENT_DIR)/go.mod $(SDKCLIENT_DIR)/main.go
	@mkdir -p $(BIN)
	@echo ">> building the OpenFeature SDK client (go-sdk $(OPENFEATURE_SDK_VERSION), flagd provider $(FLAGD_PROVIDER_VERSION))"
	cd $(SDKCLIENT_DIR) && GONOSUMDB=github.com/open-feature/flagd go build -trimpath -ldflags "-s -w" -o $(BIN)/flagplane-sdkclient .
	@rm -f $(BIN)/.sdkclient-* && touch $@

##@ Control plane (built from Go modules into bin/)

.PHONY: controlplane
controlplane: $(ETCD_STAMP) $(KUBE_STAMP) $(KUBECTL_STAMP) $(KUBE_SCHEDULER_STAMP) $(GATEWAY_API_STAMP) ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl (once per machine and version); fetch Gateway API's CRDs.

.PHONY: gateway-api-crds
gateway-api-crds: $(GATEWAY_API_STAMP) ## Copy Gateway API's standard CRDs (ReferenceGrant, HTTPRoute, ...) from its Go module into bin/gateway-api-crds.

$(GATEWAY_API_STAMP):
	@mkdir -p $(BIN)/gateway-api-crds
	@echo ">> fetching Gateway API $(GATEWAY_API_VERSION)'s CRDs from its Go module"
	dir=$$(cd $(BIN) && GOTOOLCHAIN=$(GATEWAY_API_GO) go mod download -json sigs.k8s.io/gateway-api@$(GATEWAY_API_VERSION) | \
	  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	  test -n "$$dir" && rm -f $(BIN)/gateway-api-crds/*.yaml && \
	  for f in $$dir/config/crd/standard/gateway.networking.k8s.io_*.yaml; do \
	    case $$f in *_vap_*) continue;; esac; install -m 0644 $$f $(BIN)/gateway-api-crds/; done
	@rm -f $(BIN)/.gateway-api-* && touch $@

$(CONTROLLER_GEN):
	@mkdir -p $(BIN)
	@echo ">> building controller-gen $(CONTROLLER_GEN_VERSION)"
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(BIN)/controller-gen $@

$(ETCD_STAMP): hack/tools/etcd/go.mod hack/tools/etcd/main.go
	@mkdir -p $(BIN)
	@echo ">> building etcd $(ETCD_VERSION) (about 30s cold)"
	cd hack/tools/etcd && go build -trimpath -ldflags "-s -w" -o $(BIN)/etcd .
	@rm -f $(BIN)/.etcd-* && touch $@

KUBE_LDFLAGS := -s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR)

# The Kubernetes binaries depend on the wrapper's go.mod (its pins), not on
# tools.go: adding a command to tools.go must not rebuild the others. Each
# binary or pair has a stamp of its own, named after the version, so that a
# version bump rebuilds them all.
$(KUBE_STAMP): hack/tools/kube/go.mod
	@mkdir -p $(BIN)
	@echo ">> building kube-apiserver and kube-controller-manager $(KUBE_VERSION) (about 6 minutes cold, 3 GB of memory)"
	cd hack/tools/kube && go build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
	cd hack/tools/kube && go build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
	@rm -f $(BIN)/.kube-v* && touch $@

# kubectl comes from the same wrapper module and version as the API server, so
# that the suites never depend on whatever kubectl the host has. Order-only on
# the server binaries so that `make -j` does not run two such builds at once
# (each takes about 3 GB of memory).
$(KUBECTL_STAMP): hack/tools/kube/go.mod | $(KUBE_STAMP)
	@mkdir -p $(BIN)
	@echo ">> building kubectl $(KUBE_VERSION) (about a minute once the API server is built)"
	cd hack/tools/kube && go build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/kubectl k8s.io/kubernetes/cmd/kubectl
	@rm -f $(BIN)/.kubectl-* && touch $@

# kube-scheduler, for the suites that run pods on test/node's agent. Order-only
# on the other builds for the same reason as kubectl.
$(KUBE_SCHEDULER_STAMP): hack/tools/kube/go.mod | $(KUBE_STAMP) $(KUBECTL_STAMP)
	@mkdir -p $(BIN)
	@echo ">> building kube-scheduler $(KUBE_VERSION) (about a minute once the API server is built)"
	cd hack/tools/kube && go build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
	@rm -f $(BIN)/.kube-scheduler-* && touch $@

.PHONY: clean
clean: ## Remove bin/.
	rm -rf $(BIN)
