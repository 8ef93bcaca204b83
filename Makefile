# Two entry points do all set-up on a fresh machine (see README):
#   make demo   -> installs, runs the default suite, prints the ranked leaderboard
#   make test   -> installs, runs the test suite
VENV ?= .venv
PY := $(VENV)/bin/python
PLUGINS := $(sort $(wildcard plugins/*/pyproject.toml))
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: demo test lint bench install browser clean

install: $(VENV)/.installed

# Debian's chromium for the real-browser site tests (never a browser download).
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
		echo "chromium is not installed (needs root and apt): the browser tests will skip"

$(VENV)/.installed: pyproject.toml $(PLUGINS) requirements-torch.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools wheel
	$(PY) -m pip install --quiet -r requirements-torch.txt
	$(PY) -m pip install --quiet -e '.[test,lint,clip,ray]' $(foreach p,$(PLUGINS),-e $(dir $(p)))
	touch $@

demo: install
	$(VENV)/bin/xaibench run --suite default --explainer default

test: install browser
	$(VENV)/bin/pytest -q

lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

bench: install
	for f in bench/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) .xaibench
