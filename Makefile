# workflow-operator: the two commands a newcomer needs are `make demo` and `make test`.
# Everything they need is installed by this Makefile (Rust comes from the machine's rustup).

CARGO ?= cargo
PYTHON ?= python3
SHELL := /bin/bash
# Tests run 8 to a core (at most 32): the integration tests mostly wait on the control plane and
# the pods they start (the operator's used 98 s of CPU in 376 s of wall time with two threads on
# two cores, and passed in 90 s with sixteen), so a core's worth of threads leaves it idle.
# `make test TEST_THREADS=1` runs them one by one.
TEST_THREADS ?= $(shell n=$$(( $$(nproc) * 8 )); echo $$(( n > 32 ? 32 : n )))
export RUST_TEST_THREADS = $(TEST_THREADS)

.PHONY: demo test test-python test-slow lint lint-source clippy lint-docs fmt crd argo-doc bench bench-dag hot-functions image deploy-kind test-kind tools help

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

demo: ## run examples/diamond.yaml to Completed on the embedded control plane
	$(CARGO) run --quiet -- dev --apply examples/diamond.yaml --until-done

tools: ## install the test tools: kubectl, the Python client and SDK (pytest, ruff, mypy) into .venv/; chromium and docker-registry with apt-get
	./scripts/install-test-tools.sh

test: tools ## run the whole test suite (the Rust workspace's, then the Python SDK's)
	@start=$$(date +%s); \
	$(CARGO) test --workspace --all-targets --no-fail-fast && $(CARGO) test --workspace --doc; rc=$$?; \
	$(PYTHON_CHECKS) || rc=1; \
	echo "test suite took $$(( $$(date +%s) - start ))s"; exit $$rc

# The Python SDK (sdk/python, installed into .venv/ by `make tools`): ruff (the examples with
# the package's settings), mypy --strict, and its tests on the embedded control plane of the
# debug build `cargo test` leaves in the target directory. One shell command, so that `make -n
# test` prints it rather than running a sub-make.
DEBUG_BIN := $(abspath $(or $(CARGO_TARGET_DIR),target))/debug/workflow-operator
PYTHON_CHECKS := (cd sdk/python && set -x && \
	../../.venv/bin/ruff check --config pyproject.toml . ../../examples/python && \
	../../.venv/bin/ruff format --check --config pyproject.toml . ../../examples/python && \
	../../.venv/bin/mypy --strict && \
	WORKFLOW_OPERATOR_BIN=$(DEBUG_BIN) ../../.venv/bin/python -m pytest -q)

test-python: tools ## the Python SDK's lint (ruff, mypy --strict) and tests, on a debug build
	$(CARGO) build --bin workflow-operator --bin workflow-agent
	@$(PYTHON_CHECKS)

test-slow: tools ## the slow reliability tests: 20 operator kills during 50 workflows; a 5,000-step workflow; replicas sharing shards through kills and faults
	$(CARGO) test --test it -- --ignored --nocapture reliability_crash:: reliability_awkward_input:: shards::

lint: lint-source clippy lint-docs ## rustfmt, clippy and rustdoc, warnings are errors; no module import circle, no function over 120 lines, no stale pointer

lint-source: ## the checks that compile nothing: rustfmt, no module import circle, no function over 120 lines, no stale pointer, no pass stage importing a later one
	$(CARGO) fmt --all -- --check
	$(PYTHON) scripts/module-cycles.py --all --no-tests
	$(PYTHON) scripts/long-functions.py
	$(PYTHON) scripts/stale-pointers.py
	$(PYTHON) scripts/stage-order.py

clippy: ## clippy on every target of the workspace, warnings are errors
	$(CARGO) clippy --workspace --all-targets -- -D warnings

lint-docs: ## clippy on the production build (no embedded control plane) and rustdoc, warnings are errors
	$(CARGO) clippy --no-default-features -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps

# `make test test-slow LINT_BUILD=1` (as CI runs them) also checks what `make clippy` does, while
# the tests build: cargo runs the workspace's crates through clippy-driver with the arguments
# `cargo clippy` would pass it, which lints and compiles each crate in one pass. `cargo clippy`
# would check every crate again, without code: CI would compile each dependency twice.
ifeq ($(LINT_BUILD),1)
CLIPPY_DRIVER := $(shell rustup which clippy-driver 2>/dev/null)
ifeq ($(CLIPPY_DRIVER),)
$(error LINT_BUILD=1 needs clippy-driver: rustup component add clippy)
endif
test test-slow: export RUSTC_WORKSPACE_WRAPPER := $(CLIPPY_DRIVER)
test test-slow: export CLIPPY_ARGS := -D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
endif

fmt: ## format the code
	$(CARGO) fmt --all

crd: ## regenerate crd/workflow.yaml (and its copy deploy/base/crd.yaml) from the Rust types
	$(CARGO) run --quiet -- crd > crd/workflow.yaml
	cp crd/workflow.yaml deploy/base/crd.yaml

argo-doc: ## regenerate docs/argo.md (coming from Argo Workflows) from the converter's table
	$(CARGO) run --quiet -- convert --table > docs/argo.md

# e.g. `make bench BENCH_ARGS="--workflows 1 --steps 10000 --shape chain"`.
BENCH_ARGS ?= --workflows 1000 --steps 10 --shape diamond

bench: ## measure the operator end to end (release build; BENCH_ARGS=...): one JSON object
	$(CARGO) run --release --quiet -- bench $(BENCH_ARGS)

bench-dag: ## criterion benchmarks of the pure core on 10,000-step DAGs (release build)
	$(CARGO) bench --bench dag

# The image's build (scripts/build-release.sh) profiled under callgrind in a burst of 100 x 10
# on the debug build's control plane; the functions it ran are listed for the linker to lay out
# first. Needs valgrind; about 20 minutes, most of it the fat-LTO build.
HOT_DIR := $(abspath $(or $(CARGO_TARGET_DIR),target))/hot
hot-functions: ## remake build/hot-functions.txt, the functions the image's build lays out first (needs valgrind)
	scripts/build-release.sh --target-dir $(HOT_DIR)
	$(CARGO) build --bin workflow-operator
	VALGRIND_OPTS=--demangle=no scripts/callgrind-operator.sh $(DEBUG_BIN) \
		$(HOT_DIR)/release/workflow-operator $(HOT_DIR)/callgrind.out
	$(PYTHON) scripts/hot-functions.py $(HOT_DIR)/callgrind.out \
		$(HOT_DIR)/release/workflow-operator > build/hot-functions.txt

# --- real clusters (need Docker and kind; not available on the build machines) ---
KIND ?= kind
KIND_CLUSTER ?= workflow-operator
IMAGE ?= workflow-operator:dev
KUBECTL ?= kubectl
KIND_CONTEXT := kind-$(KIND_CLUSTER)
# The operator's and reliability modules of the integration-test binary, by name filter.
OPERATOR_TESTS := --test it -- operator_ reliability_

image: ## build the operator image (Docker)
	docker build -t $(IMAGE) .

deploy-kind: image ## create a kind cluster (if needed), load the image, install the CRD and operator
	$(KIND) get clusters | grep -qx '$(KIND_CLUSTER)' || $(KIND) create cluster --name $(KIND_CLUSTER)
	$(KIND) load docker-image $(IMAGE) --name $(KIND_CLUSTER)
	$(KUBECTL) --context $(KIND_CONTEXT) apply -f crd/workflow.yaml
	$(KUBECTL) --context $(KIND_CONTEXT) wait --for=condition=Established crd/workflows.workflow.crd.com --timeout=60s
	$(KUBECTL) --context $(KIND_CONTEXT) apply -k deploy/
	$(KUBECTL) --context $(KIND_CONTEXT) -n workflow-operator rollout status deploy/workflow-operator --timeout=180s

test-kind: deploy-kind ## run the operator test files against the kind cluster (same files as on the devcluster)
	$(KUBECTL) config use-context $(KIND_CONTEXT)
	WORKFLOW_TEST_CLUSTER=kube $(CARGO) test $(OPERATOR_TESTS)
