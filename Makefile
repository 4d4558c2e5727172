# Everything runs from the project's own virtualenv; `make setup` builds it from the lock file.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test lint bench bench-upstream manifests upstream differential clean

# Byte-compiled once here: pip compiles what it installs but not this editable tree, and where
# PYTHONDONTWRITEBYTECODE is set every service start would compile the project's modules again,
# and a `kcm dev` stack starts five or more such processes.
setup: $(STAMP)
	@$(BIN)/python -m compileall -q services shared

$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

run: setup
	$(BIN)/kcm dev --state-dir .kcm

# Three workers, each taking whole test files, so a module's shared `kcm dev` stack stays in one
# process. End-to-end tests mostly wait on their stacks, so two workers leave a two-core machine
# partly idle. (Starting the longest files first was slower: the three heaviest stacks then
# start together.) Then the second tier: the `kcm dev` end-to-end modules again, on etcd and
# kube-apiserver (what cannot run there, and why, is in tests/e2e/conftest.py).
PYTEST := $(BIN)/pytest -q -rfE -n 3 --dist loadfile
test: setup upstream
	$(PYTEST) --durations=15
	$(PYTEST) --durations=10 --apiserver=upstream tests/e2e

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# Each built-in controller's k8s/ manifest and compose service, from its folder's deploy.yaml.
manifests: setup
	$(BIN)/kcm manifests

# bench/side_by_side.py runs upstream's binaries, hence `upstream` (a no-op once they are built).
bench: setup upstream
	@for script in bench/*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

# Upstream kube-controller-manager and kcm side by side on kube-apiserver, alone; sizes and
# scenarios through ARGS, e.g. `make bench-upstream ARGS="--pods 200 --scenarios deployment"`.
bench-upstream: setup upstream
	$(BIN)/python bench/side_by_side.py $(ARGS)

# The pinned upstream kube-apiserver, kube-controller-manager, kube-scheduler and etcd, built with Go
# from their published modules (tools/upstream/*/go.mod) into .upstream/; reused while the pins stand.
upstream:
	$(PYTHON) tools/upstream/build.py

# Every scenario of tools/differential/scenarios/ under upstream kube-controller-manager, then under
# kcm, on one upstream API server; prints the differences per controller (needs `make upstream`).
differential: setup
	$(BIN)/python -m tools.differential

clean:
	rm -rf $(VENV) .kcm .kcm-diff .mypy_cache .ruff_cache .pytest_cache
