# workflow-operator: the two commands a newcomer needs are `make demo` and `make test`.
# Everything they need is installed by this Makefile (Rust comes from the machine's rustup).

CARGO ?= cargo
PYTHON ?= python3
SHELL := /bin/bash

.PHONY: demo test test-slow lint fmt crd bench image deploy-kind test-kind tools help

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

demo: ## run examples/diamond.yaml to Completed on the embedded control plane
	$(CARGO) run --quiet -- dev --apply examples/diamond.yaml --until-done

tools: ## install the test tools (kubectl, Python kubernetes client) into .venv/
	./scripts/install-test-tools.sh

test: tools ## run the whole test suite
	@start=$$(date +%s); \
	$(CARGO) test --all-targets --no-fail-fast && $(CARGO) test --doc; rc=$$?; \
	echo "test suite took $$(( $$(date +%s) - start ))s"; exit $$rc

lint: ## rustfmt and clippy, warnings are errors
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings

fmt: ## format the code
	$(CARGO) fmt --all

crd: ## regenerate crd/workflow.yaml from the Rust types
	$(CARGO) run --quiet -- crd > crd/workflow.yaml
