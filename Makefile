# flagplane — build, generate, test.
#
# Everything the tests need is built here from Go modules, into bin/ (git-ignored):
# controller-gen, golangci-lint, etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, helm, crane and Prometheus. Each binary is built
# once per machine (TOOL_CACHE, below) and rebuilt when its pinned version
# changes.

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

# helm (charts/flagplane: lint, template, the install suite's helm install) and
# crane (pushing the image), from wrapper modules like kubectl's.
HELM_VERSION := $(shell awk '$$1=="require" && $$2=="helm.sh/helm/v3" {print $$3}' hack/tools/helm/go.mod)
CRANE_VERSION := $(shell awk '$$1=="require" && $$2=="github.com/google/go-containerregistry" {print $$3}' hack/tools/crane/go.mod)
# The Kubernetes version helm assumes without a cluster (helm template, lint):
# its client-go's, as helm's own Makefile sets it.
HELM_KUBE_MINOR := $(shell awk '$$1=="k8s.io/client-go" {split($$2, v, "."); print v[2]}' hack/tools/helm/go.mod)
HELM_STAMP := $(BIN)/.helm-$(HELM_VERSION)-kube1.$(HELM_KUBE_MINOR)
CRANE_STAMP := $(BIN)/.crane-$(CRANE_VERSION)
# Argo CD, whose own Lua health code (util/lua, gitops-engine's health)
# checks config/gitops/argocd's health checks: a wrapper module like helm's.
ARGOCD_VERSION := $(shell awk '$$1=="github.com/argoproj/argo-cd/v3" {print $$2}' hack/tools/argocdhealth/go.mod)
ARGOCD_HEALTH_STAMP := $(BIN)/.argocdhealth-$(ARGOCD_VERSION)

CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
# golangci-lint v2 (make lint, .golangci.yml), built with this Go from its
# module: a linter built with an older Go than the code's cannot load it.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
ETCD_STAMP := $(BIN)/.etcd-$(ETCD_VERSION)
KUBE_STAMP := $(BIN)/.kube-$(KUBE_VERSION)
KUBECTL_STAMP := $(BIN)/.kubectl-$(KUBE_VERSION)
KUBE_SCHEDULER_STAMP := $(BIN)/.kube-scheduler-$(KUBE_VERSION)
FLAGD_STAMP := $(BIN)/.flagd-$(FLAGD_VERSION)-static
SDKCLIENT_STAMP := $(BIN)/.sdkclient-$(OPENFEATURE_SDK_VERSION)-$(FLAGD_PROVIDER_VERSION)-static
# The Prometheus server that test/e2e runs for the Prometheus gate of rollout
# policies (a wrapper module, hack/tools/prometheus). Module v0.3XX.Y is
# Prometheus 3.XX.Y.
PROMETHEUS_MODULE_VERSION := $(shell awk '$$1=="require" && $$2=="github.com/prometheus/prometheus" {print $$3}' hack/tools/prometheus/go.mod)
PROMETHEUS_VERSION := $(shell awk '$$1=="require" && $$2=="github.com/prometheus/prometheus" {split(substr($$3, 4), v, "."); printf "%d.%d.%s", substr(v[1], 1, 1), substr(v[1], 2), v[2]}' hack/tools/prometheus/go.mod)
PROMETHEUS_STAMP := $(BIN)/.prometheus-$(PROMETHEUS_MODULE_VERSION)
# chainsaw, the runner of OFO's suite (make conformance), at the version
# OFO's CI installs; defined before make test, which names it as a
# prerequisite (a variable defined after a rule is empty in its
# prerequisites).
# v0.2.12 does not compile with Go 1.26 (testing.testDeps gained a method):
# it is built with the Go toolchain its module was written for, which the
# go command downloads from the module proxy.
CHAINSAW_VERSION := v0.2.12
CHAINSAW_GO := go1.24.6
CHAINSAW := $(BIN)/chainsaw-$(CHAINSAW_VERSION)

# Tests find the control plane through envtest's variable.
export KUBEBUILDER_ASSETS := $(BIN)

GINKGO_FLAGS ?=
TEST_TIMEOUT ?= 30m
# Test times (hack/testtimes). Every go test of make test runs with -json
# through testtimes record, which prints what go test without -json would
# (the output of a package that fails, the "ok" line of one that passes)
# and appends each package's time and result to TEST_TIMES; each step of
# make test marks its start and end there. make test prints the table at
# its end, and so do test-unit, fuzz-short and test-integration when make
# is asked for them last; make test-times prints the last run's. The run
# is the time the first make started: a run's first mark or package
# empties the file of the run before.
TESTTIMES := $(BIN)/testtimes
# The tool cache (hack/toolcache): every tool below that is built from a Go
# module is kept in TOOL_CACHE, outside the clone, under a key made of its
# build commands, its wrapper module's files and the Go toolchain. A fresh
# clone, a worktree, or bin/ after make clean, on a machine that built the
# tool before, copies it from there instead of compiling it; a change to any
# part of the key builds it again. TOOL_CACHE= (empty) builds every tool.
ifeq ($(origin TOOL_CACHE),undefined)
TOOL_CACHE := $(shell echo "$${XDG_CACHE_HOME:-$$HOME/.cache}")/flagplane/tools
endif
TOOLCACHE := $(BIN)/toolcache
TEST_TIMES := $(BIN)/test-times.tsv
# testtimes record's flags: -v prints the output of every package, as
# go test -v would, not only of those that fail.
TEST_OUTPUT_FLAGS ?=
# testtimes print's flags (make test-times): -stopped, right after make
# stopped, counts the unfinished step to now; -run <run> prints nothing
# but that run (.ci/run).
TEST_TIMES_FLAGS ?=
ifndef FLAGPLANE_TEST_TIMES_RUN
FLAGPLANE_TEST_TIMES_RUN := $(shell date +%s%N)
endif
export FLAGPLANE_TEST_TIMES_RUN
BENCH_TIME ?= 1x
# Each fan-out run makes 10 edits one at a time and a burst of 10 per size.
FANOUT_BENCH_TIME ?= 1x
# FeatureFlag edits per provider in the edit-to-served benchmark (test/e2e).
E2E_BENCH_EDITS ?= 20
# The staged-rollout benchmark (test/e2e): rollouts promoted per size (10
# and 100 consumers in the promoted step), and edits per measurement of a
# flag set no policy targets (twice without policies, once with).
STAGED_BENCH_ROLLOUTS ?= 10
STAGED_BENCH_EDITS ?= 100
# Edits per provider timed on the real kubelet (test/realinstall), with
# syncFrequency 1s and the kubelet's default (a file edit then takes a minute).
REALNODE_BENCH_EDITS ?= 6
# hack/e2ebench: e.g. -edits 100, -sizes 10,1000, -strict.
E2E_BENCH_FLAGS ?=
# hack/stagedbench: the gates at scale and a hostile tenant's cost to
# another (e.g. -namespaces 100 -pods 10 -trials 5).
STAGED_SCALE_FLAGS ?=
# hack/fleetbench: a fleet hub's edit to every member Current and its
# cost per member (e.g. -sizes 3 -edits 5 -simulated 100 -idle 10s).
FLEET_BENCH_FLAGS ?=

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
manifests: $(CONTROLLER_GEN) $(HELM_STAMP) ## Generate CRDs (config/crd/bases; the fleet hub's in config/fleet/crd) and RBAC (config/rbac/role.yaml) from the markers of every package; keep config/ and charts/flagplane one source (hack/manifests).
	$(CONTROLLER_GEN) crd paths="{./api/v1beta1/...,./api/policy/...,./api/delivery/...}" output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) crd paths=./api/fleet/... output:crd:artifacts:config=config/fleet/crd
	$(CONTROLLER_GEN) rbac:roleName=flagplane-manager paths=./... output:rbac:artifacts:config=config/rbac
	go run ./hack/manifests -helm $(BIN)/helm

.PHONY: verify-generated
verify-generated: $(TESTTIMES) generate manifests ## Fail when generated code or manifests differ from what is committed.
	$(step-start)
	@changed=$$(git status --porcelain -- api config charts); \
	if [ -n "$$changed" ]; then \
	  echo "generated files differ from what is committed: run 'make generate manifests' and commit the result" >&2; \
	  echo "$$changed" >&2; git --no-pager diff -- api config charts | head -40 >&2; exit 1; fi
	$(step-end)

.PHONY: fmt
fmt: ## Format the Go code.
	go fmt ./...

.PHONY: vet
vet: $(TESTTIMES) ## Vet the Go code.
	$(step-start)
	go vet ./...
	$(step-end)

.PHONY: lint
lint: $(TESTTIMES) $(GOLANGCI_LINT) ## Lint the Go code, tests and hack/ included, with golangci-lint (.golangci.yml).
	$(step-start)
	$(GOLANGCI_LINT) run ./...
	$(step-end)

.PHONY: install-crds
install-crds: ## Apply the CRDs to the cluster of the current kubeconfig.
	$(or $(shell command -v kubectl),$(BIN)/kubectl) apply --server-side -f config/crd/bases

.PHONY: build
build: ## Build the flagplane binaries into bin/: manager (the operator) and flagplane (the CLI: topology, explain, diff, migrate).
	go build -o $(BIN)/ ./cmd/...

# The CLI as a kubectl plugin: kubectl runs kubectl-flagplane from PATH for
# `kubectl flagplane ...`, and kubectl_complete-flagplane (the same binary)
# to complete it.
PLUGIN_DIR ?= $(HOME)/.local/bin

.PHONY: plugin
plugin: ## Build the CLI as the kubectl plugin bin/kubectl-flagplane (and bin/kubectl_complete-flagplane, its completion).
	go build -trimpath -ldflags "-s -w" -o $(BIN)/kubectl-flagplane ./cmd/flagplane
	ln -sf kubectl-flagplane $(BIN)/kubectl_complete-flagplane

.PHONY: install-plugin
install-plugin: plugin ## Install the kubectl plugin into PLUGIN_DIR (default ~/.local/bin), which must be on PATH: then `kubectl flagplane explain ...`.
	mkdir -p $(PLUGIN_DIR)
	install -m 0755 $(BIN)/kubectl-flagplane $(PLUGIN_DIR)/kubectl-flagplane
	ln -sf kubectl-flagplane $(PLUGIN_DIR)/kubectl_complete-flagplane
	@echo ">> installed $(PLUGIN_DIR)/kubectl-flagplane; kubectl plugin list should show it"

##@ Image

# The manager's OCI image, built without a container engine (hack/image, on
# go-containerregistry): the static manager binary on an empty base, run as
# 65532 (non-root), with OCI labels. Reproducible: the same commit gives the
# same digest (every timestamp is the commit's time, the binary is built with
# -trimpath). It is written as an OCI image layout into IMAGE_DIR; push it
# with `make image-push` (crane) or skopeo (docs/install.md, "The image").
# Its default name is the one the chart and config/ run by default: the
# project's registry path, tagged with the chart's appVersion.
APP_VERSION := $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' charts/flagplane/Chart.yaml)
IMAGE ?= ghcr.io/flagplane/flagplane:$(APP_VERSION)
IMAGE_DIR ?= $(CURDIR)/dist/image
IMAGE_ARCH ?= $(shell go env GOARCH)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_BINARY := $(IMAGE_DIR)-bin/manager-linux-$(IMAGE_ARCH)

.PHONY: image
image: ## Build the manager's image (IMAGE=<registry>/flagplane:<tag>, default ghcr.io/flagplane/flagplane:<the chart's appVersion>) into IMAGE_DIR (dist/image, an OCI layout); prints its digest.
	@mkdir -p $(dir $(IMAGE_BINARY))
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) go build -trimpath \
	  -ldflags "-s -w -buildid= -X main.version=$(VERSION)" -o $(IMAGE_BINARY) ./cmd/manager
	@cd hack/image && go run . -binary $(IMAGE_BINARY) -o $(IMAGE_DIR) -name $(IMAGE) -arch $(IMAGE_ARCH) \
	  -version $(VERSION) -revision $(REVISION) -created $(SOURCE_DATE_EPOCH) \
	  -source https://github.com/flagplane/flagplane > $(IMAGE_DIR).digest
	@echo "image $(IMAGE) $$(cat $(IMAGE_DIR).digest) (version $(VERSION)), OCI layout in $(IMAGE_DIR)"

.PHONY: image-push
image-push: image $(CRANE_STAMP) ## Push the image to IMAGE (<registry>/flagplane:<tag>) with crane, with the credentials of your docker config.
	$(BIN)/crane push $(IMAGE_DIR) $(IMAGE)

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

FLEET_FLAGS ?=

.PHONY: fleet
fleet: controlplane ## A fleet hub and three member clusters (dev, staging, prod), each a real control plane: a FeatureFlag placed on all three, an edit staged dev -> staging -> prod, another halted by a failing gate in staging, and `flagplane fleet status` after each (FLEET_FLAGS=-v for the logs).
	@go build -o $(BIN)/flagplane-fleetdemo ./hack/fleetdemo
	@$(BIN)/flagplane-fleetdemo $(FLEET_FLAGS)

CLUSTER_FLAGS ?=

.PHONY: cluster
cluster: realnode ## A real single-node cluster (kubelet, containerd, CNI, kube-proxy, CoreDNS) with flagplane installed from its chart and image, until Ctrl-C (needs root; CLUSTER_FLAGS=-sync-frequency=5s, -hold=10m).
	@go build -o $(BIN)/flagplane-cluster ./hack/cluster
	@$(BIN)/flagplane-cluster $(CLUSTER_FLAGS)

.PHONY: docs-topology
docs-topology: ## Re-render docs/topology.dot and docs/topology.svg (the README's picture) from the demo.
	go run ./hack/demo -hold=0 -out docs

##@ Tests

# make -n test (test/docs runs it) runs the sub-makes' own dry runs, one
# after the other: the real recipe runs them even under -n, as it does
# every line that calls $(MAKE), and would write their logs over those of
# a make test running meanwhile, whose suites test/docs is one of.
DRY_RUN := $(findstring n,$(firstword -$(MAKEFLAGS)))

.PHONY: test
test: test-prerequisites ## Everything: generated-file check, vet, golangci-lint, the chart's lint and renders, the Argo CD health checks under Argo CD's code, unit tests, a short fuzz of admission, integration tests, and the OpenFeature Operator's own suite under its own runner; then the wall time of each step and the time of each package tested.
ifneq ($(DRY_RUN),)
	$(MAKE) --no-print-directory conformance MAKE_TEST=1 GO_TEST_VET=$(GO_TEST_VET)
	$(MAKE) --no-print-directory test-integration-late MAKE_TEST=1 GO_TEST_VET=$(GO_TEST_VET)
	$(MAKE) --no-print-directory test-unit fuzz-short test-integration-after-unit MAKE_TEST=1 GO_TEST_VET=$(GO_TEST_VET)
	$(MAKE) --no-print-directory test-integration MAKE_TEST=1 GO_TEST_VET=$(GO_TEST_VET)
else
	@{ r=0; { $(MAKE) --no-print-directory conformance MAKE_TEST=1 GO_TEST_VET=$(GO_TEST_VET) || { $(call mark-failed,conformance); false; }; } > $(TEST_LOG)-conformance.log 2>&1 || r=1; \
	  { $(MAKE) --no-print-directory test-integration-late MAKE_TEST=1 GO_TEST_VET=$(GO_TEST_VET) || { $(call mark-failed,test-integration-late); false; }; } > $(TEST_LOG)-integration-late.log 2>&1 || r=$$((r + 2)); \
	  exit $$r; } & later=$$!; \
	{ $(MAKE) --no-print-directory test-unit fuzz-short test-integration-after-unit MAKE_TEST=1 GO_TEST_VET=$(GO_TEST_VET) || { $(call mark-failed,test-unit fuzz-short test-integration-after-unit); exit 1; }; } > $(TEST_LOG)-unit.log 2>&1 & unit=$$!; \
	failed=; $(MAKE) --no-print-directory test-integration MAKE_TEST=1 GO_TEST_VET=$(GO_TEST_VET) || { $(call mark-failed,test-integration); failed=test-integration; }; \
	wait $$unit || failed="$$failed unit"; echo ">> make test-unit fuzz-short test-integration-after-unit, run beside test-integration (above):"; cat $(TEST_LOG)-unit.log; \
	wait $$later; r=$$?; [ $$((r & 1)) -eq 0 ] || failed="$$failed conformance"; [ $$((r & 2)) -eq 0 ] || failed="$$failed integration-late"; \
	echo ">> make conformance, run beside the others:"; cat $(TEST_LOG)-conformance.log; \
	echo ">> make test-integration-late, run after it:"; cat $(TEST_LOG)-integration-late.log; \
	$(TESTTIMES) print -file $(TEST_TIMES); \
	[ -z "$$failed" ] && exit 0; echo ">> make test failed in: $$failed"; \
	for f in $$failed; do [ -f $(TEST_LOG)-$$f.log ] || continue; \
	  echo ">> the last lines of $(TEST_LOG)-$$f.log (all of it above):"; tail -n 40 $(TEST_LOG)-$$f.log; done; \
	exit 1
endif

# make test's prerequisites, built and checked TEST_BUILD_JOBS at a time
# (make -j), so that one build's links and downloads overlap another's
# compiles; a cold run is bound by CPU all the same (docs/development.md
# has the one measured). First
# the tools (each from a module of its own under hack/tools, or by go
# install; none reads this module's files) beside the generated-file check,
# which rewrites api/, config/ and charts/; then what reads those files
# (vet then lint, the chart's renders, the manager's image) beside the rest.
# The Kubernetes builds stay one at a time (their order-only prerequisites).
TEST_BUILD_JOBS ?= 3
TEST_TOOLS = $(CONTROLLER_GEN) $(HELM_STAMP) $(GOLANGCI_LINT) $(ETCD_STAMP) $(KUBE_STAMP) \
	$(KUBECTL_STAMP) $(KUBE_SCHEDULER_STAMP) $(GATEWAY_API_STAMP) $(ARGOCD_HEALTH_STAMP) $(PROMETHEUS_STAMP) \
	$(CHAINSAW) $(FLAGD_STAMP) $(SDKCLIENT_STAMP) $(KUBELET_STAMP) $(COREDNS_STAMP) $(REALNODE_IMAGES_STAMP) \
	$(JSCLIENT_STAMP) realnode-packages

.PHONY: test-prerequisites
test-prerequisites: $(TESTTIMES)
	@$(TESTTIMES) mark -file $(TEST_TIMES) tools start
	@$(MAKE) --no-print-directory -j$(TEST_BUILD_JOBS) --output-sync=target $(TEST_TOOLS) verify-generated
	@$(TESTTIMES) mark -file $(TEST_TIMES) tools end
	@$(MAKE) --no-print-directory -j$(TEST_BUILD_JOBS) --output-sync=target vet-then-lint controlplane test-chart argocd-health realnode prometheus $(CHAINSAW)

# vet, then golangci-lint: both compile this module's packages and their
# dependencies, which the second finds in the build cache; side by side
# into an empty cache, each compiled them (17.5 minutes for both).
.PHONY: vet-then-lint
vet-then-lint:
	@$(MAKE) --no-print-directory vet
	@$(MAKE) --no-print-directory lint

# make test runs three lanes side by side, each printing its output once
# it is done, but the integration tests': the integration tests; the unit
# tests and then the fuzz (4 minutes of both cores alone), which fill the
# time the integration suites spend waiting on what they drive, followed
# by the suites of INTEGRATION_AFTER_UNIT; and OFO's suite (make
# conformance), which spends most of its 6 minutes waiting, on chainsaw's
# timeouts where flagplane differs on purpose, at a tenth of a core,
# followed by the suites of INTEGRATION_LATE. The integration tests leave
# out the suites of both lists, which run beside them from the end of the
# step before, rather than after them on cores by then mostly idle. MAKE_TEST tells the
# steps that make test built what they need (the manager's image among
# it, which two makes would write at once) and prints the table itself.
# A step that fails is marked so in TEST_TIMES when it fails (its step of
# the sub-make's steps that started and did not end), and make test names
# it last, with the end of its log: what a CI that keeps only the end of
# the output shows.
mark-failed = for s in $(1); do $(TESTTIMES) mark -file $(TEST_TIMES) $$s failed; done
TEST_LOG := $(BIN)/make-test
MAKE_TEST ?=

# go test vets each package before testing it, with a few of go vet's
# checks. make test runs go vet ./... first: every check, on the same
# packages and test files, built alike. So its go tests without the race
# detector leave that out; those with it (which build the files of
# //go:build race, that go vet ./... leaves out) keep it.
GO_TEST_VET ?=
test: GO_TEST_VET := -vet=off

.PHONY: test-times
test-times: $(TESTTIMES) ## Print the test times of the last run (TEST_TIMES): each step's wall time, and each package's time and result, slowest first.
	@$(TESTTIMES) print -file $(TEST_TIMES) $(TEST_TIMES_FLAGS)

$(TESTTIMES): $(wildcard hack/testtimes/*.go)
	@mkdir -p $(BIN)
	go build -o $@ ./hack/testtimes

# step-start and step-end are the first and the last line of the recipe of
# each step of make test: they mark its start and end in TEST_TIMES, and
# step-end prints the table when make was asked for the step last and it
# tests packages. TEST_RECORD pipes go test -json into testtimes record,
# followed by the label of the packages' step in the table.
step-start = @$(TESTTIMES) mark -file $(TEST_TIMES) $@ start
define step-end
@$(TESTTIMES) mark -file $(TEST_TIMES) $@ end
$(if $(MAKE_TEST),,$(if $(filter $@,$(filter test-unit fuzz-short test-integration test-integration-late test-integration-after-unit,$(lastword $(MAKECMDGOALS)))),@$(TESTTIMES) print -file $(TEST_TIMES)))
endef
TEST_RECORD = | $(TESTTIMES) record -file $(TEST_TIMES) $(TEST_OUTPUT_FLAGS) -step
# TEST_EXEC runs each test binary under testtimes exec, which records the
# CPU time of the binary and of the processes it waited for (the control
# plane a suite starts among them): the table gives it beside each
# package's time, since a run on 2 cores is bound by the sum of them.
TEST_EXEC = -exec '"$(TESTTIMES)" exec -file "$(TEST_TIMES)"'
# TEST_LINK links the test binaries without DWARF (-w), which nothing in a
# test reads (stack traces and the race detector's reports come from the
# symbol table): about a quarter less CPU to link a suite
# (docs/development.md).
TEST_LINK = -ldflags=-w

# Value sets the chart is linted and rendered with: its defaults, every
# component, cert-manager with an issuer of your own, and the
# namespace-scoped mode (the team's part, the administrator's part, both).
CHART_VALUE_SETS := \
	"" \
	"certManager.enabled=true,serviceMonitor.enabled=true,networkPolicy.enabled=true" \
	"sync.enabled=false,certManager.enabled=true,certManager.issuerRef.kind=ClusterIssuer,certManager.issuerRef.name=ca" \
	"namespaced.enabled=true" \
	"managedBy=open-feature-operator" \
	"namespaced.enabled=true,namespaced.clusterObjects=false,certManager.enabled=true,serviceMonitor.enabled=true,networkPolicy.enabled=true" \
	"namespaced.enabled=true,namespaced.teamObjects=false,namespaced.extraNamespaces={team-a-jobs}"

.PHONY: argocd-health
argocd-health: $(TESTTIMES) $(ARGOCD_HEALTH_STAMP) ## Run every health_test.yaml of config/gitops/argocd with Argo CD's own Lua health code (hack/tools/argocdhealth).
	$(step-start)
	$(BIN)/argocdhealth config/gitops/argocd/resource_customizations
	$(step-end)

.PHONY: test-chart
test-chart: $(TESTTIMES) $(HELM_STAMP) ## helm lint and helm template charts/flagplane, with its defaults and other value sets.
	$(step-start)
	@for set in $(CHART_VALUE_SETS); do \
	  args=""; if [ -n "$$set" ]; then args="--set $$set"; fi; \
	  echo ">> helm lint / template charts/flagplane $$args"; \
	  $(BIN)/helm lint --strict charts/flagplane --namespace flagplane-system $$args >/dev/null || \
	    { $(BIN)/helm lint --strict charts/flagplane --namespace flagplane-system $$args; exit 1; }; \
	  $(BIN)/helm template flagplane charts/flagplane --namespace flagplane-system $$args >/dev/null; \
	done
	$(step-end)

# Packages under test/ that need no control plane (plain Go tests): they
# run with the unit tests.
TEST_LIBRARIES := ./test/faultproxy ./test/gitopshealth ./test/admissionfuzz ./test/internal/scratch ./test/internal/bigflagset
# Ginkgo suites run with the race detector: the reconcile path (informer
# callbacks, queues, graph snapshots read while written) and its API-call
# accounting. The others run without it, to keep CI's time in proportion.
RACE_SUITES := ./test/reconcile ./test/accounting
# Plain Go tests under test/ (no Ginkgo flags): the image, built by make image;
# the real node's own tests (it starts, serves, and leaves nothing behind).
PLAIN_TESTS := ./test/image ./test/realnode
# go test starts the packages it is given in that order, two at a time
# (-p, the cores). The slowest (make test's table of test times) are given
# first, so that none starts last and runs alone while the other core
# idles; go test drops a package given twice.
UNIT_FIRST := ./webhooks ./topology ./test/admissionfuzz ./workflows ./syncserver ./controllers
# How many of those suites run at once (go test -p): the cores, by default.
INTEGRATION_PARALLEL ?= $(shell nproc)
INTEGRATION_FIRST := ./test/realinstall ./test/fleet ./test/install ./test/e2e ./test/counts ./test/history ./test/flagd \
	./test/gitops ./test/security ./test/sizes ./test/failover ./test/admission ./test/node ./test/docs ./test/api \
	./test/realclients ./test/ofo ./test/migrate ./test/controlplane
# The suites make test runs, one at a time, after OFO's suite
# (INTEGRATION_LATE) and after the unit tests and the fuzz
# (INTEGRATION_AFTER_UNIT), rather than in the integration tests (above),
# so that each of its three lanes ends at about the same time; make
# test-integration alone runs them with the others.
INTEGRATION_LATE := ./test/fleet ./test/install
INTEGRATION_AFTER_UNIT := ./test/history ./test/flagd ./test/security
# What the integration tests leave out: the suites that go tests of their
# own run.
NOT_IN_SUITES = $(RACE_SUITES) $(TEST_LIBRARIES) $(PLAIN_TESTS) $(if $(MAKE_TEST),$(INTEGRATION_LATE) $(INTEGRATION_AFTER_UNIT))
# The packages of $(1) that exist and have tests.
with-tests = $(foreach p,$(1),$(if $(wildcard $(p)/*_test.go),$(p)))

.PHONY: test-unit
test-unit: $(TESTTIMES) ## Unit, golden and property tests of the pure packages, with the race detector.
	$(step-start)
	go test -json $(TEST_EXEC) $(TEST_LINK) -race -count=1 -timeout $(TEST_TIMEOUT) \
	  $(call with-tests,$(UNIT_FIRST)) \
	  $$(go list ./... | grep -v /test/) $(TEST_LIBRARIES) $(TEST_RECORD) test-unit
	$(step-end)

.PHONY: test-integration
test-integration: $(TESTTIMES) $(if $(MAKE_TEST),,controlplane realclients realnode prometheus) ## Ginkgo suites on the real local control plane (and real flagd, OpenFeature clients and Prometheus); RACE_SUITES with the race detector.
	$(step-start)
	@$(MAKE) --no-print-directory -j3 --output-sync=target integration-race integration-plain integration-suites GO_TEST_VET=$(GO_TEST_VET)
	$(step-end)

# The integration tests are three go tests, run side by side (make -j3,
# each one's output printed whole once it is done): the race suites and
# the plain tests, each with -p 1, and the other suites, two at a time.
# Most suites spend much of their time waiting on what they drive (a
# rollout's pause, a leader's lease, a kubelet), at well under both
# cores: the race suites' build and run fill that time rather than come
# before it.
.PHONY: integration-race integration-plain integration-suites
integration-suites:
	go test -json $(TEST_EXEC) $(TEST_LINK) $(GO_TEST_VET) -p $(INTEGRATION_PARALLEL) -count=1 -timeout $(TEST_TIMEOUT) \
	  $(call with-tests,$(filter-out $(NOT_IN_SUITES),$(INTEGRATION_FIRST))) \
	  $$(go list $(addsuffix /...,./test) | grep -v $(foreach p,$(NOT_IN_SUITES),-e '$(patsubst ./%,/%,$(p))$$')) -ginkgo.v -ginkgo.label-filter='!bench' $(GINKGO_FLAGS) $(TEST_RECORD) test-integration
integration-race:
	go test -json $(TEST_EXEC) $(TEST_LINK) -race -p 1 -count=1 -timeout $(TEST_TIMEOUT) $(RACE_SUITES) -ginkgo.v $(GINKGO_FLAGS) $(TEST_RECORD) test-integration:race
integration-plain:
	go test -json $(TEST_EXEC) $(TEST_LINK) $(GO_TEST_VET) -p 1 -count=1 -timeout $(TEST_TIMEOUT) $(PLAIN_TESTS) $(TEST_RECORD) test-integration:plain

# suites-one-at-a-time runs the integration suites $(1), one at a time,
# as the step $(2) of the table.
define suites-one-at-a-time
	$(step-start)
	go test -json $(TEST_EXEC) $(TEST_LINK) $(GO_TEST_VET) -p 1 -count=1 -timeout $(TEST_TIMEOUT) $(1) -ginkgo.v -ginkgo.label-filter='!bench' $(GINKGO_FLAGS) $(TEST_RECORD) $(2)
	$(step-end)
endef

.PHONY: test-integration-late test-integration-after-unit
test-integration-late: $(TESTTIMES) $(if $(MAKE_TEST),,controlplane realclients realnode prometheus) ## The integration suites of INTEGRATION_LATE, one at a time: make test runs them after OFO's suite, and leaves them out of its make test-integration.
	$(call suites-one-at-a-time,$(INTEGRATION_LATE),test-integration:late)
test-integration-after-unit: $(TESTTIMES) $(if $(MAKE_TEST),,controlplane realclients realnode prometheus) ## The integration suites of INTEGRATION_AFTER_UNIT, one at a time: make test runs them after the unit tests and the fuzz, and leaves them out of its make test-integration.
	$(call suites-one-at-a-time,$(INTEGRATION_AFTER_UNIT),test-integration:after-unit)

.PHONY: health-testdata
health-testdata: controlplane realclients $(ARGOCD_HEALTH_STAMP) ## Rewrite the Argo CD health checks' testdata (config/gitops/argocd) from the objects test/gitops brings into each state, and check them with both runners.
	FLAGPLANE_UPDATE_HEALTH_TESTDATA=1 go test -count=1 -timeout $(TEST_TIMEOUT) ./test/gitops -ginkgo.focus='Health'
	go test -count=1 ./test/gitopshealth
	$(BIN)/argocdhealth config/gitops/argocd/resource_customizations

.PHONY: bench
bench: controlplane realclients realnode ## Benchmarks: topology per-event cost against graph size and a full rebuild; sync server fan-out (edit to receipt by 100, 1k, 10k subscribers); what one FeatureFlag edit costs its readers (1, 10, 100 consuming namespaces); end to end on the control plane (edit to ConfigMap at 10 to 10k workloads, start-up with 10k workloads and 1k flag sets); FeatureFlag edit to flagd serving it, per provider, through the test node; staged rollouts (promote to the step's 10 or 100 consumers serving it, and the edit path with and without rollout policies); the gates over 1,000 namespaces and 10,000 pods that never answer, and another tenant's halt meanwhile; admission with the blast-radius warning and flagplane explain at 10k workloads and 1k flag sets; FeatureFlags at the rule bound, 1, 4 and 8 admitted at once; the spec author and the Pod webhook at the request bound, 1 and 8 at once, and bursts of 8 and 32 updates through the spec author's HTTP server; a fleet hub, edit to every member Current with 3, 10 and 1,000 simulated members (bench-fleet); the test control plane's kube-apiserver at GOGC 100 and 400 (CPU per write of a 10,000-flag FeatureFlag, peak memory).
	go run ./hack/benchtable -benchtime $(BENCH_TIME)
	go test ./test/controlplane -run '^$$' -bench APIServerGOGC -benchtime 10x -timeout $(TEST_TIMEOUT)
	go test ./syncserver -run '^$$' -bench FanOut -benchtime $(FANOUT_BENCH_TIME) -timeout $(TEST_TIMEOUT)
	go test ./syncserver -run '^$$' -bench FlagSetEdit -benchtime 200x -benchmem -timeout $(TEST_TIMEOUT)
	go test ./webhooks -run '^$$' -bench ValidatorBlastRadius -benchtime 2000x -benchmem -timeout $(TEST_TIMEOUT)
	go test ./webhooks -run '^$$' -bench ConcurrentRuleBoundAdmissions -benchtime 1x -benchmem -timeout $(TEST_TIMEOUT)
	go test ./webhooks -run '^$$' -bench ConcurrentBoundAdmissions -benchtime 2x -timeout $(TEST_TIMEOUT)
	go test ./webhooks -run '^$$' -bench BurstsAtTheBound -benchtime 1x -timeout $(TEST_TIMEOUT)
	go test ./inspect/explain -run '^$$' -bench Explain -benchtime 2000x -benchmem -timeout $(TEST_TIMEOUT)
	go run ./hack/e2ebench $(E2E_BENCH_FLAGS)
	FLAGPLANE_E2E_BENCH_EDITS=$(E2E_BENCH_EDITS) go test ./test/e2e -run '^$$' -bench EditToServed -benchtime 1x -timeout $(TEST_TIMEOUT)
	FLAGPLANE_E2E_BENCH_ROLLOUTS=$(STAGED_BENCH_ROLLOUTS) FLAGPLANE_E2E_BENCH_PLAIN_EDITS=$(STAGED_BENCH_EDITS) go test ./test/e2e -run '^$$' -bench StagedRollout -benchtime 1x -timeout $(TEST_TIMEOUT)
	go run ./hack/stagedbench $(STAGED_SCALE_FLAGS)
	FLAGPLANE_REALNODE_SYNC_FREQUENCY=1s FLAGPLANE_REALNODE_BENCH_EDITS=$(REALNODE_BENCH_EDITS) go test ./test/realinstall -count=1 -v -timeout $(TEST_TIMEOUT) -ginkgo.label-filter=bench
	FLAGPLANE_REALNODE_SYNC_FREQUENCY=default FLAGPLANE_REALNODE_BENCH_EDITS=$(REALNODE_BENCH_EDITS) go test ./test/realinstall -count=1 -v -timeout $(TEST_TIMEOUT) -ginkgo.label-filter=bench
	go run ./hack/fleetbench $(FLEET_BENCH_FLAGS)

.PHONY: bench-fleet
bench-fleet: controlplane ## A fleet hub (controllers/fleet) placing one FeatureFlag: edit → every member Current (p50, p99) with 3 and 10 real members, each a control plane running flagplane, and 1,000 simulated as namespaces of one shared member; the hub process's RSS, Go heap and CPU per member, idle and during the edits; a halt reaching every cluster (gate Confirmed, one cluster that never confirms). Prints the tables of docs/benchmarks.md; about fifteen minutes on 2 cores.
	go run ./hack/fleetbench $(FLEET_BENCH_FLAGS)

# Fuzzing. Go fuzzes one target per invocation. FUZZ_TARGETS are every
# target of the module's packages (func Fuzz... in a _test.go file), as
# <package>:<name>; ADMISSION_FUZZ those of admission (the webhooks, and
# the API server's own admission of the CRDs), which make test fuzzes for
# FUZZ_SHORT_TIME each. The fuzz workers append the longest admission of
# each path, with its input, to FUZZ_TIMINGS (test/admissionfuzz), which
# fuzz-report prints.
FUZZTIME ?= 60s
FUZZ_SHORT_TIME ?= 5s
FUZZ_TARGETS = $(shell go list -f '{{range .TestGoFiles}}{{$$.ImportPath}} {{$$.Dir}}/{{.}}{{"\n"}}{{end}}{{range .XTestGoFiles}}{{$$.ImportPath}} {{$$.Dir}}/{{.}}{{"\n"}}{{end}}' ./... | \
	while read -r pkg file; do sed -n "s|^func \(Fuzz[A-Za-z0-9_]*\).*|$$pkg:\1|p" "$$file"; done)
ADMISSION_FUZZ := ./webhooks:FuzzFlagSetValidator ./webhooks:FuzzSourceValidator ./webhooks:FuzzPodMutator ./webhooks:FuzzSpecAuthor \
	./webhooks:FuzzRolloutPolicyValidator \
	./test/admissionfuzz:FuzzFlagdCRD ./test/admissionfuzz:FuzzSourcePolicyCRD ./test/admissionfuzz:FuzzSourceCRD \
	./test/admissionfuzz:FuzzRolloutPolicyCRD
FUZZ_TIMINGS := $(BIN)/fuzz-admission-timings.tsv

# run-fuzz fuzzes each <package>:<name> of $(1) for $(2). Each package's
# test binary is built once, instrumented for fuzzing (go test -c -fuzz),
# and run for each of its targets as go test -fuzz runs it: in the
# package's folder, with the inputs it finds interesting kept in the Go
# cache, through test2json. A run that fails
# with nothing but "context deadline exceeded" and writes no failing input
# is Go's fuzz coordinator racing its own -fuzztime deadline on a loaded
# machine (go.dev/issue/75804, fixed in Go 1.27), not a finding: it is run
# once more. Any other failure, or the same one twice, fails.
define run-fuzz
	@mkdir -p $(BIN)/fuzz && rm -f $(FUZZ_TIMINGS)
	@fuzzcache=$$(go env GOCACHE)/fuzz; built=; \
	for t in $(1); do \
	  pkg=$${t%:*}; name=$${t##*:}; \
	  if [ "$$pkg" != "$$built" ]; then \
	    read -r dir path <<< "$$(go list -f '{{.Dir}} {{.ImportPath}}' $$pkg)"; \
	    bin=$(BIN)/fuzz/$$(echo $$path | tr / _).test; \
	    echo ">> building $$path's tests for fuzzing"; \
	    go test -c $(TEST_LINK) -fuzz "^$$name$$" -o $$bin $$pkg; built=$$pkg; \
	  fi; \
	  for try in 1 2; do \
	    echo ">> $$name ($$pkg) for $(2)"; \
	    if (cd $$dir && FLAGPLANE_FUZZ_TIMINGS=$(FUZZ_TIMINGS) go tool test2json -t -p $$path $$bin -test.v=test2json -test.paniconexit0 \
	          -test.run '^$$' -test.fuzz "^$$name$$" -test.fuzztime $(2) -test.fuzzcachedir $$fuzzcache/$$path) 2>&1 \
	        $(TEST_RECORD) "$@:$$name" -stream | tee $(BIN)/fuzz-last.log; then break; fi; \
	    if [ $$try -eq 1 ] && grep -q 'context deadline exceeded' $(BIN)/fuzz-last.log && ! grep -q 'Failing input written' $(BIN)/fuzz-last.log; then \
	      echo ">> $$name: the fuzz deadline race of go.dev/issue/75804, no failing input: once more"; continue; fi; \
	    exit 1; \
	  done; \
	done
endef

.PHONY: fuzz
fuzz: $(TESTTIMES) ## Fuzz every target of the module (func Fuzz* in a _test.go file), one at a time, for FUZZTIME (default 60s); run the admission extremes; print the longest admission of each path, with its input.
	$(call run-fuzz,$(FUZZ_TARGETS),$(FUZZTIME))
	FLAGPLANE_FUZZ_TIMINGS=$(FUZZ_TIMINGS) go test -json $(TEST_EXEC) $(TEST_LINK) $(GO_TEST_VET) -count=1 -p 1 ./webhooks ./test/admissionfuzz -run '^(TestAdmissionExtremes|TestAdmittedExtremes)$$' $(TEST_RECORD) $@:extremes
	@$(MAKE) --no-print-directory fuzz-report

.PHONY: fuzz-short
fuzz-short: $(TESTTIMES) ## Fuzz the admission targets (the webhooks, the API server's admission of the CRDs) for FUZZ_SHORT_TIME each (default 5s); run the admission extremes without the race detector; print the longest admissions.
	$(step-start)
	$(call run-fuzz,$(ADMISSION_FUZZ),$(FUZZ_SHORT_TIME))
	FLAGPLANE_FUZZ_TIMINGS=$(FUZZ_TIMINGS) go test -json $(TEST_EXEC) $(TEST_LINK) $(GO_TEST_VET) -count=1 -p 1 ./webhooks ./test/admissionfuzz -run '^(TestAdmissionExtremes|TestAdmittedExtremes)$$' $(TEST_RECORD) $@:extremes
	@$(MAKE) --no-print-directory fuzz-report
	$(step-end)

.PHONY: fuzz-report
fuzz-report: ## Print the longest admission of each path the last fuzz run saw, with its input (FUZZ_TIMINGS).
	@test -s $(FUZZ_TIMINGS) || { echo "no admission timed: run make fuzz or make fuzz-short" >&2; exit 1; }
	@echo ">> longest admission per path (the webhook timeout is 5 s)"
	@awk -F'\t' '$$2 + 0 > max[$$1] + 0 { max[$$1] = $$2; input[$$1] = $$3 } \
	  END { for (p in max) printf "   %-52s %10.1f ms   %s\n", p, max[p] / 1e6, input[p] }' $(FUZZ_TIMINGS) | sort

# $(call cached-tool,<name>,<its files in bin/>,<its input files>,<the variable of its build commands>)
# copies the tool from TOOL_CACHE into bin/, or runs its build commands (in a
# subshell: they may cd) and saves what they built there. The key has the
# commands as expanded here, with this clone's path taken out, so that every
# clone of a commit finds the same entries.
cached-tool = @mkdir -p $(BIN); export FLAGPLANE_TOOL_RECIPE='$(call tool-recipe,$(4))'; \
	$(TOOLCACHE) restore $(call toolcache-flags,$(1),$(3)) $(2) || { \
	  ( $($(4)) ) && $(TOOLCACHE) save $(call toolcache-flags,$(1),$(3)) $(2); }
toolcache-flags = -cache '$(TOOL_CACHE)' -bin $(BIN) -name $(1) -inputs '$(2)'
tool-recipe = $(subst ','"'"',$(subst $(CURDIR),.,$(subst $(BIN),bin,$($(1)))))

$(TOOLCACHE): $(wildcard hack/toolcache/*.go)
	@mkdir -p $(BIN)
	go build -o $@ ./hack/toolcache

##@ Real clients (built from Go modules into bin/)

.PHONY: realclients
realclients: $(FLAGD_STAMP) $(SDKCLIENT_STAMP) ## Build flagd and the OpenFeature SDK client that test/realclients runs.

# flagd's own modules are not in the checksum database; go.sum pins them.
FLAGD_BUILD = echo ">> building flagd $(FLAGD_VERSION) (about 2 minutes cold)" && \
	cd hack/tools/flagd && CGO_ENABLED=0 GONOSUMDB=github.com/open-feature/flagd go build -trimpath \
	  -ldflags "-s -w -X main.version=$(FLAGD_VERSION)" -o $(BIN)/flagd github.com/open-feature/flagd/flagd
$(FLAGD_STAMP): hack/tools/flagd/go.mod hack/tools/flagd/tools.go | $(TOOLCACHE)
	$(call cached-tool,flagd,flagd,hack/tools/flagd/go.mod hack/tools/flagd/go.sum hack/tools/flagd/tools.go,FLAGD_BUILD)
	@rm -f $(BIN)/.flagd-* && touch $@

SDKCLIENT_BUILD = echo ">> building the OpenFeature SDK client (go-sdk $(OPENFEATURE_SDK_VERSION), flagd provider $(FLAGD_PROVIDER_VERSION))" && \
	cd $(SDKCLIENT_DIR) && CGO_ENABLED=0 GONOSUMDB=github.com/open-feature/flagd go build -trimpath -ldflags "-s -w" -o $(BIN)/flagplane-sdkclient .
$(SDKCLIENT_STAMP): $(SDKCLIENT_DIR)/go.mod $(SDKCLIENT_DIR)/main.go | $(TOOLCACHE)
	$(call cached-tool,sdkclient,flagplane-sdkclient,$(SDKCLIENT_DIR)/go.mod $(SDKCLIENT_DIR)/go.sum $(SDKCLIENT_DIR)/main.go,SDKCLIENT_BUILD)
	@rm -f $(BIN)/.sdkclient-* && touch $@

# Prometheus, for test/e2e's Prometheus gate spec: its query API and
# scraping are all the spec needs. Built without its web UI's assets, which
# the module does not hold (tag builtinassets is left out: the UI's pages
# answer 500, /api/v1 works), and without service discovery other than
# static and file configs (tag remove_all_sd drops the cloud providers' SDKs,
# a third of the packages it would compile).
.PHONY: prometheus
prometheus: $(PROMETHEUS_STAMP) ## Build the Prometheus server (from its Go module, without the web UI) into bin/, for test/e2e's Prometheus gate.

PROMETHEUS_BUILD = echo ">> building Prometheus $(PROMETHEUS_VERSION) (module $(PROMETHEUS_MODULE_VERSION); about 6 minutes cold on 2 busy cores)" && \
	cd hack/tools/prometheus && CGO_ENABLED=0 go build -trimpath -tags remove_all_sd \
	  -ldflags "-s -w -X github.com/prometheus/common/version.Version=$(PROMETHEUS_VERSION)" \
	  -o $(BIN)/prometheus github.com/prometheus/prometheus/cmd/prometheus
$(PROMETHEUS_STAMP): hack/tools/prometheus/go.mod hack/tools/prometheus/tools.go | $(TOOLCACHE)
	$(call cached-tool,prometheus,prometheus,hack/tools/prometheus/go.mod hack/tools/prometheus/go.sum hack/tools/prometheus/tools.go,PROMETHEUS_BUILD)
	@rm -f $(BIN)/.prometheus-* && touch $@

# The JavaScript client (test/realclients/jsclient): the OpenFeature server
# SDK with flagd's provider from npm, run by Node.js (the machine's, or
# Debian's nodejs, installed here when missing), for the real node's image
# of it. npm ci installs exactly package-lock.json.
JSCLIENT_DIR := test/realclients/jsclient
JSCLIENT_STAMP := $(BIN)/jsclient/.built

.PHONY: jsclient
jsclient: $(JSCLIENT_STAMP) ## Install the JavaScript OpenFeature client's packages (npm ci) into bin/jsclient.

# Order-only on realnode-packages: one apt-get at a time under make -j.
$(JSCLIENT_STAMP): $(wildcard $(JSCLIENT_DIR)/*.js $(JSCLIENT_DIR)/*.json) | realnode-packages
	@command -v node >/dev/null && command -v npm >/dev/null || { \
	  echo ">> installing Debian's nodejs and npm"; \
	  if [ "$$(id -u)" != 0 ]; then echo "installing nodejs needs root (apt-get)" >&2; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null; }
	@echo ">> npm ci for the JavaScript client (node $$(node --version))"
	rm -rf $(BIN)/jsclient && mkdir -p $(BIN)/jsclient
	cp $(JSCLIENT_DIR)/*.js $(JSCLIENT_DIR)/package.json $(JSCLIENT_DIR)/package-lock.json $(BIN)/jsclient/
	cd $(BIN)/jsclient && npm ci --omit=dev --no-audit --no-fund --loglevel=error
	@touch $@

##@ The real node (test/realnode)

# A real single-node cluster: kubelet and kube-proxy from the same wrapper
# module as the API server, CoreDNS from its module, containerd, runc and
# the CNI plugins from Debian's packages (installed here when missing), and
# a registry serving images built locally (hack/image/registry). flagd and
# the SDK client are built static (above), so that images can hold them.
REALNODE_PACKAGES := containerd runc containernetworking-plugins iptables nftables conntrack busybox-static iproute2 util-linux procps curl libpcre2-8-0 libssl3 zlib1g libcrypt1
COREDNS_VERSION := $(shell awk '$$1=="require" && $$2=="github.com/coredns/coredns" {print $$3}' hack/tools/coredns/go.mod)
KUBELET_STAMP := $(BIN)/.kubelet-$(KUBE_VERSION)
COREDNS_STAMP := $(BIN)/.coredns-$(COREDNS_VERSION)
REALNODE_IMAGES_STAMP := $(BIN)/realnode/.built
# Debian's nginx, extracted from its package (not installed: no service
# starts on this machine) for the nginx image the OpenFeature Operator's
# manifests name; its libraries are in REALNODE_PACKAGES.
NGINX_STAMP := $(BIN)/realnode/.nginx

.PHONY: realnode
realnode: realnode-packages controlplane realclients jsclient $(HELM_STAMP) $(KUBELET_STAMP) $(COREDNS_STAMP) $(REALNODE_IMAGES_STAMP) $(NGINX_STAMP) image ## Everything the real-node suites need: Debian's containerd, runc, CNI plugins, curl and nginx; kubelet, kube-proxy, CoreDNS and the node's registry; the manager's image.

.PHONY: realnode-packages
realnode-packages: ## Install the Debian packages the real node needs, when missing (apt-get; needs root).
	@missing=""; for p in $(REALNODE_PACKAGES); do 	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; done; 	if [ -n "$$missing" ]; then 	  echo ">> installing Debian packages for the real node:$$missing"; 	  if [ "$$(id -u)" != 0 ]; then echo "installing$$missing needs root (apt-get)" >&2; exit 1; fi; 	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; 	fi

# Ordered after the other Kubernetes builds: each takes gigabytes of memory.
KUBELET_BUILD = echo ">> building kubelet and kube-proxy $(KUBE_VERSION) (about 2 minutes once the API server is built)" && \
	cd hack/tools/kube && go build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/kubelet k8s.io/kubernetes/cmd/kubelet && \
	go build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/kube-proxy k8s.io/kubernetes/cmd/kube-proxy
$(KUBELET_STAMP): hack/tools/kube/go.mod | $(KUBE_STAMP) $(KUBECTL_STAMP) $(KUBE_SCHEDULER_STAMP) $(TOOLCACHE)
	$(call cached-tool,kubelet,kubelet kube-proxy,$(KUBE_INPUTS),KUBELET_BUILD)
	@rm -f $(BIN)/.kubelet-* && touch $@

COREDNS_BUILD = echo ">> building CoreDNS $(COREDNS_VERSION) with the plugins of a cluster's DNS" && \
	cd hack/tools/coredns && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $(BIN)/coredns .
$(COREDNS_STAMP): hack/tools/coredns/go.mod hack/tools/coredns/main.go | $(TOOLCACHE)
	$(call cached-tool,coredns,coredns,hack/tools/coredns/go.mod hack/tools/coredns/go.sum hack/tools/coredns/main.go,COREDNS_BUILD)
	@rm -f $(BIN)/.coredns-* && touch $@

$(REALNODE_IMAGES_STAMP): $(wildcard hack/image/registry/*.go hack/image/pause/*.go) hack/image/go.mod
	@mkdir -p $(BIN)/realnode
	cd hack/image && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $(BIN)/realnode/registry ./registry
	cd hack/image && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $(BIN)/realnode/pause ./pause
	@touch $@

$(NGINX_STAMP): | realnode-packages
	@mkdir -p $(BIN)/realnode/debs
	@echo ">> extracting Debian's nginx into bin/realnode/nginx"
	cd $(BIN)/realnode/debs && rm -f nginx_*.deb && \
	  { apt-get download nginx 2>/dev/null || { apt-get update -qq && apt-get download nginx; }; }
	rm -rf $(BIN)/realnode/nginx && dpkg-deb -x $(BIN)/realnode/debs/nginx_*.deb $(BIN)/realnode/nginx
	@touch $@

##@ Conformance: the OpenFeature Operator's own e2e suite, from its module

OFO_DIR ?=
OFO_VERSION ?= v0.9.2
# Deployments of one pod that make bench-ofo creates under each operator.
OFO_BENCH_PODS ?= 10
CONFORMANCE_FLAGS ?=

CHAINSAW_BUILD = echo ">> building chainsaw $(CHAINSAW_VERSION) with $(CHAINSAW_GO) (about 2 minutes cold)" && \
	GOTOOLCHAIN=$(CHAINSAW_GO) GOBIN=$(BIN) GOFLAGS= go install github.com/kyverno/chainsaw@$(CHAINSAW_VERSION) && \
	mv $(BIN)/chainsaw $(CHAINSAW)
$(CHAINSAW): | $(TOOLCACHE)
	$(call cached-tool,chainsaw,$(notdir $(CHAINSAW)),,CHAINSAW_BUILD)

.PHONY: chainsaw
chainsaw: $(CHAINSAW) ## Build chainsaw, the OpenFeature Operator's e2e runner, into bin/.

.PHONY: conformance
conformance: $(TESTTIMES) $(if $(MAKE_TEST),,realnode $(CHAINSAW)) ## Run the OpenFeature Operator's e2e suite unchanged, with chainsaw, against flagplane installed from its chart on a real node (needs root): OFO's module at OFO_VERSION through the Go module proxy, or OFO_DIR=<a checkout of open-feature-operator>; fails on a failure that is no documented difference, or when docs/openfeature-operator.md's table is not the run's.
	$(step-start)
	@go build -o $(BIN)/flagplane-conformance ./hack/conformance
	@$(BIN)/flagplane-conformance $(if $(OFO_DIR),-ofo-dir "$(OFO_DIR)",-ofo-version $(OFO_VERSION)) -chainsaw $(CHAINSAW) $(CONFORMANCE_FLAGS)
	$(step-end)

.PHONY: bench-ofo
bench-ofo: realnode $(CHAINSAW) ## The OpenFeature Operator itself on the real node, not in make test: OFO_DIR=<a checkout of open-feature-operator>. Builds OFO's manager from it, installs it as its Makefile does (kustomize config/default; cert-manager's Secrets and CA bundles made by the command) and runs OFO's own suite against OFO: the control of make conformance. Then the same work under each operator, one after the other on fresh nodes: OFO_BENCH_PODS opted-in Deployments, with admission latency from the API server's histogram and the manager's memory and CPU from the kubelet.
	@test -n "$(OFO_DIR)" || { echo "OFO_DIR is not set: make bench-ofo OFO_DIR=<a checkout of open-feature-operator> (OFO's manager is built from it)" >&2; exit 1; }
	@go build -o $(BIN)/flagplane-conformance ./hack/conformance
	@$(BIN)/flagplane-conformance -operator ofo -ofo-dir "$(OFO_DIR)" -chainsaw $(CHAINSAW) -report $(BIN)/conformance/ofo-results.md $(CONFORMANCE_FLAGS)
	@for op in flagplane ofo; do \
	  $(BIN)/flagplane-conformance -operator $$op -ofo-dir "$(OFO_DIR)" -chainsaw $(CHAINSAW) -doc "" \
	    -measure $(OFO_BENCH_PODS) -report $(BIN)/conformance/measure-$$op.md || exit 1; done
	@cat $(BIN)/conformance/measure-flagplane.md; tail -n 1 $(BIN)/conformance/measure-ofo.md

.PHONY: migrate-ofo
migrate-ofo: realnode ## A live migration off the OpenFeature Operator on the real node, not in make test: OFO_DIR=<a checkout of open-feature-operator>. OFO runs two Deployments (file and kubernetes providers) while pods are created, the flag set edited and every flagd asked; then docs/openfeature-operator.md's steps are followed, and the way back to OFO. Reports the pods admitted with and without flagd and refused, and any flagd answer older than one it gave before.
	@test -n "$(OFO_DIR)" || { echo "OFO_DIR is not set: make migrate-ofo OFO_DIR=<a checkout of open-feature-operator> (OFO's manager is built from it)" >&2; exit 1; }
	@go build -o $(BIN)/flagplane-conformance ./hack/conformance
	@$(BIN)/flagplane-conformance -migrate -ofo-dir "$(OFO_DIR)" -doc "" -report $(BIN)/conformance/migrate.md $(CONFORMANCE_FLAGS)

.PHONY: conformance-doc
conformance-doc: ## make conformance, then write its table into docs/openfeature-operator.md.
	$(MAKE) conformance CONFORMANCE_FLAGS="$(CONFORMANCE_FLAGS) -write-doc"

##@ Tools (built from Go modules into bin/)

.PHONY: helm
helm: $(HELM_STAMP) ## Build helm into bin/.

.PHONY: crane
crane: $(CRANE_STAMP) ## Build crane into bin/.

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT) ## Build golangci-lint into bin/.

# go install with a version builds golangci-lint with the requirements of its
# own go.mod, the ones its releases are tested with.
GOLANGCI_LINT_BUILD = echo ">> building golangci-lint $(GOLANGCI_LINT_VERSION) (about 3 minutes cold on 2 cores)" && \
	GOBIN=$(BIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) && \
	mv $(BIN)/golangci-lint $(GOLANGCI_LINT)
$(GOLANGCI_LINT): | $(TOOLCACHE)
	$(call cached-tool,golangci-lint,$(notdir $(GOLANGCI_LINT)),,GOLANGCI_LINT_BUILD)

HELM_BUILD = echo ">> building helm $(HELM_VERSION) (about 3 minutes cold)" && \
	cd hack/tools/helm && go build -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	  -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_KUBE_MINOR) \
	  -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_KUBE_MINOR)" \
	  -o $(BIN)/helm helm.sh/helm/v3/cmd/helm
$(HELM_STAMP): hack/tools/helm/go.mod | $(TOOLCACHE)
	$(call cached-tool,helm,helm,hack/tools/helm/go.mod hack/tools/helm/go.sum,HELM_BUILD)
	@rm -f $(BIN)/.helm-* && touch $@

CRANE_BUILD = echo ">> building crane $(CRANE_VERSION) (about a minute cold)" && \
	cd hack/tools/crane && go build -trimpath -ldflags "-s -w" -o $(BIN)/crane github.com/google/go-containerregistry/cmd/crane
$(CRANE_STAMP): hack/tools/crane/go.mod | $(TOOLCACHE)
	$(call cached-tool,crane,crane,hack/tools/crane/go.mod hack/tools/crane/go.sum,CRANE_BUILD)
	@rm -f $(BIN)/.crane-* && touch $@

ARGOCD_HEALTH_BUILD = echo ">> building argocdhealth with Argo CD $(ARGOCD_VERSION) (about 5 minutes cold on 2 cores)" && \
	cd hack/tools/argocdhealth && go build -trimpath -ldflags "-s -w" -o $(BIN)/argocdhealth .
$(ARGOCD_HEALTH_STAMP): hack/tools/argocdhealth/go.mod hack/tools/argocdhealth/main.go | $(TOOLCACHE)
	$(call cached-tool,argocdhealth,argocdhealth,hack/tools/argocdhealth/go.mod hack/tools/argocdhealth/go.sum hack/tools/argocdhealth/main.go,ARGOCD_HEALTH_BUILD)
	@rm -f $(BIN)/.argocdhealth-* && touch $@

##@ Control plane (built from Go modules into bin/)

.PHONY: controlplane
controlplane: $(TESTTIMES) $(ETCD_STAMP) $(KUBE_STAMP) $(KUBECTL_STAMP) $(KUBE_SCHEDULER_STAMP) $(GATEWAY_API_STAMP) ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl (once per machine and version); fetch Gateway API's CRDs.
	$(step-start)
	$(step-end)

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

CONTROLLER_GEN_BUILD = echo ">> building controller-gen $(CONTROLLER_GEN_VERSION)" && \
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION) && \
	mv $(BIN)/controller-gen $(CONTROLLER_GEN)
$(CONTROLLER_GEN): | $(TOOLCACHE)
	$(call cached-tool,controller-gen,$(notdir $(CONTROLLER_GEN)),,CONTROLLER_GEN_BUILD)

ETCD_BUILD = echo ">> building etcd $(ETCD_VERSION) (about 30s cold)" && \
	cd hack/tools/etcd && go build -trimpath -ldflags "-s -w" -o $(BIN)/etcd .
$(ETCD_STAMP): hack/tools/etcd/go.mod hack/tools/etcd/main.go | $(TOOLCACHE)
	$(call cached-tool,etcd,etcd,hack/tools/etcd/go.mod hack/tools/etcd/go.sum hack/tools/etcd/main.go,ETCD_BUILD)
	@rm -f $(BIN)/.etcd-* && touch $@

KUBE_LDFLAGS := -s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR)

# The Kubernetes binaries depend on the wrapper's go.mod (its pins), not on
# tools.go: adding a command to tools.go must not rebuild the others. Each
# binary or pair has a stamp of its own, named after the version, so that a
# version bump rebuilds them all.
KUBE_INPUTS := hack/tools/kube/go.mod hack/tools/kube/go.sum
KUBE_BUILD = echo ">> building kube-apiserver and kube-controller-manager $(KUBE_VERSION) (about 6 minutes cold, 3 GB of memory)" && \
	cd hack/tools/kube && go build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver && \
	go build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
$(KUBE_STAMP): hack/tools/kube/go.mod | $(TOOLCACHE)
	$(call cached-tool,kube,kube-apiserver kube-controller-manager,$(KUBE_INPUTS),KUBE_BUILD)
	@rm -f $(BIN)/.kube-v* && touch $@

# kubectl comes from the same wrapper module and version as the API server, so
# that the suites never depend on whatever kubectl the host has. Order-only on
# the server binaries so that `make -j` does not run two such builds at once
# (each takes about 3 GB of memory).
KUBECTL_BUILD = echo ">> building kubectl $(KUBE_VERSION) (about a minute once the API server is built)" && \
	cd hack/tools/kube && go build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/kubectl k8s.io/kubernetes/cmd/kubectl
$(KUBECTL_STAMP): hack/tools/kube/go.mod | $(KUBE_STAMP) $(TOOLCACHE)
	$(call cached-tool,kubectl,kubectl,$(KUBE_INPUTS),KUBECTL_BUILD)
	@rm -f $(BIN)/.kubectl-* && touch $@

# kube-scheduler, for the suites that run pods on test/node's agent. Order-only
# on the other builds for the same reason as kubectl.
KUBE_SCHEDULER_BUILD = echo ">> building kube-scheduler $(KUBE_VERSION) (about a minute once the API server is built)" && \
	cd hack/tools/kube && go build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $(BIN)/kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
$(KUBE_SCHEDULER_STAMP): hack/tools/kube/go.mod | $(KUBE_STAMP) $(KUBECTL_STAMP) $(TOOLCACHE)
	$(call cached-tool,kube-scheduler,kube-scheduler,$(KUBE_INPUTS),KUBE_SCHEDULER_BUILD)
	@rm -f $(BIN)/.kube-scheduler-* && touch $@

.PHONY: clean
clean: ## Remove bin/.
	rm -rf $(BIN)
