# kubebuilder-style targets for people who type them by habit. Each one calls the same scripts and
# commands the README and docs/deploying.md describe; nothing here is needed to use kthena-py.
#
#   make help                 list the targets
#   make run                  README command 1: local control plane, manager, sample (hack/local-up.sh)
#   make test                 README command 2: every test tier (hack/test.sh); TOX_ENVS=unit make test
#   make install / uninstall  the CRDs into / out of the cluster of $KUBECONFIG
#   make deploy / undeploy    manifests/default (kustomize) into / out of that cluster
#   make helm                 lint and render charts/kthena-py; make helm-deploy installs it
#   make docker-build         the image (Containerfile); IMG=registry/kthena-py:tag CONTAINER_TOOL=podman

IMG ?= kthena-py:latest
CONTAINER_TOOL ?= $(shell command -v docker >/dev/null 2>&1 && echo docker || echo podman)
NAMESPACE ?= kthena-system
PYTHON ?= .venv/bin/python
# The tools hack/build-controlplane.sh builds from Go modules (built on first use, then cached).
KUBECTL ?= $(shell hack/build-controlplane.sh --print-path kubectl)
HELM ?= $(shell hack/build-controlplane.sh --print-path helm)

IMG_REPOSITORY = $(firstword $(subst @, ,$(subst :, ,$(IMG))))
IMG_TAG = $(if $(findstring :,$(IMG)),$(lastword $(subst :, ,$(IMG))),latest)

.PHONY: help run run-manager test lint unit manifests build-controlplane install uninstall deploy undeploy \
	helm helm-deploy helm-undeploy docker-build

help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 22

run: ## README command 1: local control plane + manager + sample until Ctrl-C (hack/local-up.sh).
	hack/local-up.sh

run-manager: ## The manager against the cluster of $KUBECONFIG (or ~/.kube/config), webhooks off.
	$(PYTHON) -m kthena_py.main manager --webhook-port 0 --log-format console

test: ## README command 2: lint, unit, envtest and cluster tiers (hack/test.sh); TOX_ENVS=unit for one.
	hack/test.sh

lint: ## ruff, mypy --strict, import-linter (the tox lint env).
	TOX_ENVS=lint hack/test.sh

unit: ## The unit tier only.
	TOX_ENVS=unit hack/test.sh

manifests: ## Regenerate the CRDs (manifests/crd, charts/kthena-py/crds) and docs/api.md.
	hack/gen-crds.sh

build-controlplane: ## Build the control-plane binaries and tools that are missing.
	hack/build-controlplane.sh

install: ## Install the CRDs into the cluster of $KUBECONFIG.
	$(KUBECTL) apply --server-side -f manifests/crd/

uninstall: ## Delete the CRDs (and every ModelServing, AutoscalingPolicy and ModelBooster with them).
	$(KUBECTL) delete --ignore-not-found -f manifests/crd/

deploy: ## Install manifests/default (kustomize) into the cluster of $KUBECONFIG.
	$(KUBECTL) apply --server-side -k manifests/default

undeploy: ## Delete manifests/default (CRDs included, with every object of their kinds).
	$(KUBECTL) delete --ignore-not-found -k manifests/default

helm: ## Lint and render the Helm chart (what helm-deploy would install).
	$(HELM) lint --strict charts/kthena-py
	$(HELM) template kthena-py charts/kthena-py --namespace $(NAMESPACE) --set image.repository=$(IMG_REPOSITORY),image.tag=$(IMG_TAG)

helm-deploy: ## helm upgrade --install the chart into $(NAMESPACE) with image $(IMG).
	$(HELM) upgrade --install kthena-py charts/kthena-py --namespace $(NAMESPACE) --create-namespace \
		--set image.repository=$(IMG_REPOSITORY),image.tag=$(IMG_TAG)

helm-undeploy: ## helm uninstall (the CRDs stay).
	$(HELM) uninstall kthena-py --namespace $(NAMESPACE)

docker-build: ## Build the image $(IMG) from Containerfile with $(CONTAINER_TOOL).
	$(CONTAINER_TOOL) build -t $(IMG) -f Containerfile .
