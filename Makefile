# Two entry points do all set-up on a fresh machine (see README):
#   make demo   -> installs, runs the default suite, prints the ranked leaderboard
#   make test   -> installs, runs the test suite
# TORCH_INDEX picks the index torch comes from, e.g. a CPU-only one (see README):
#   make demo TORCH_INDEX=https://download.pytorch.org/whl/cpu
# make dist builds wheels for xaibench and every plugin under plugins/ into $(DIST)/.
VENV ?= .venv
DIST ?= dist
TORCH_INDEX ?=
PY := $(VENV)/bin/python
PLUGINS := $(sort $(wildcard plugins/*/pyproject.toml))
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: demo test lint bench install browser dist clean record

install: $(VENV)/.installed

# Debian's chromium for the real-browser site tests (never a browser download).
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
		echo "chromium is not installed (needs root and apt): the browser tests will skip"

# imgaug is installed only for its files, the `photos` dataset's quokka and its polygon (never
# imported: imgaug 0.4.0 does not import under NumPy 2); --no-deps keeps out opencv, matplotlib
# and Shapely. metaquantus (the reference tests/test_meta_consistency.py compares MC with) goes
# into its own folder, never site-packages: its wheel also installs a top-level `tests` package,
# `Icon` and `.DS_Store` files, and cannot be uninstalled by pip. ferret-xai (the reference
# tests/test_eraser_ferret.py compares ERASER with) goes into its own folder too, without its
# dependencies (seaborn, shap, spacy, transformers <5, ...): the test imports only its evaluators.
# Every pyproject sets package-dir "" = ".", so editable installs are a plain .pth and setuptools
# prints no warning.
$(VENV)/.installed: pyproject.toml $(PLUGINS) requirements-torch.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools wheel
	$(PY) -m pip install --quiet -r requirements-torch.txt $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PY) -m pip install --quiet -e '.[test,lint,clip,ray,hf,text]' $(foreach p,$(PLUGINS),-e $(dir $(p)))
	$(PY) -m pip install --quiet --no-deps imgaug==0.4.0
	$(PY) -m pip install --quiet --no-deps --upgrade --target $(VENV)/metaquantus metaquantus==0.0.5
	$(PY) -m pip install --quiet --no-deps --upgrade --target $(VENV)/ferret ferret-xai==0.4.2
	touch $@

demo: install
	$(VENV)/bin/xaibench run --suite default --explainer default

test: install browser
	$(VENV)/bin/pytest -q

# The leaderboard of record (docs/record.md): what record/record-v1 lacks, then its board; resumable.
DATA ?= ../shared/data
record: install
	$(VENV)/bin/xaibench record build --data-dir $(DATA)
	test -f record/record-v1/meta/validity.json || $(VENV)/bin/xaibench record board --tests --data-dir $(DATA)
	$(VENV)/bin/xaibench record board

lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

bench: install
	for f in bench/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

# Offline: setuptools comes from the set-up (no build isolation), nothing is downloaded.
dist:
	@test -x $(PY) || $(MAKE) install
	rm -rf $(DIST) build $(foreach p,$(PLUGINS),$(dir $(p))build)
	$(PY) -m pip wheel --quiet --no-deps --no-build-isolation --disable-pip-version-check \
		--wheel-dir $(DIST) . $(dir $(PLUGINS))
	@ls $(DIST)

clean:
	rm -rf $(VENV) .xaibench $(DIST) build $(foreach p,$(PLUGINS),$(dir $(p))build)
