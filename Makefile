# `make demo` and `make test` each build .venv on first use and install what they need: the demo
# only the core package, the tests every extra.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HASH   := $(shell cat pyproject.toml | cksum | cut -d' ' -f1)
# the core alone (numpy, scipy, click, tqdm, threadpoolctl) for the demo; everything for the tests
CORE_STAMP := $(VENV)/.core-$(HASH)
STAMP      := $(VENV)/.installed-$(HASH)

.PHONY: demo test lint docs install install-core bench clean browser

$(CORE_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	@rm -f $(VENV)/.core-*
	@touch $@

$(STAMP): $(CORE_STAMP)
	$(BIN)/python -m pip install -q -e ".[test]"
	@rm -f $(VENV)/.installed-*
	@touch $@

install-core: $(CORE_STAMP)

install: $(STAMP)

demo: $(CORE_STAMP)
	@mkdir -p build
	$(BIN)/deniable privatize examples/sample.txt -o build/sample.private.txt -m madlib -e 10 --seed 0
	@echo; echo "Madlib, epsilon=10, bundled GloVe embedding, seed 0; choose your epsilon with deniable calibrate (written to build/sample.private.txt):"; echo
	@awk 'NR==FNR { src[FNR] = $$0; next } { print "  input:   " src[FNR]; print "  private: " $$0; print "" }' \
		examples/sample.txt build/sample.private.txt

# Headless Chromium (and node) for the browser tests in tests/web: Debian's packages, installed only
# when missing and only where apt-get can run (root, as in CI); Playwright never downloads a browser.
browser:
	@missing=""; command -v chromium >/dev/null 2>&1 || missing=" chromium"; command -v node >/dev/null 2>&1 || missing="$$missing nodejs"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing$$missing for the browser tests (apt-get)"; \
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) >/dev/null 2>&1 \
				|| echo "warning: could not install$$missing; the browser tests will skip"; \
		else echo "note:$$missing not installed; the browser tests will skip (apt-get install$$missing)"; fi; \
	fi

test: $(STAMP) browser
	$(BIN)/python -m pytest -q

# ruff and mypy (both from the test extra), configured in pyproject.toml
lint: $(STAMP)
	$(BIN)/python -m ruff check src tests benchmarks scripts
	$(BIN)/python -m mypy

# the documentation site (Sphinx + MyST + furo, from the test extra; source docs/, configuration
# docs/api/conf.py) in build/docs: a warning — a broken link or anchor included — fails the build;
# then the relative links of the README and of every page under docs/ (scripts/check_doc_links.py)
docs: $(STAMP)
	$(BIN)/python -m sphinx -b html -W --keep-going -q -E -c docs/api docs build/docs
	$(BIN)/python scripts/check_doc_links.py
	@echo "Documentation: build/docs/index.html"

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_madlib.py
	$(BIN)/python benchmarks/bench_tem.py
	$(BIN)/python benchmarks/bench_brr.py
	$(BIN)/python benchmarks/bench_ngrams_scale.py --users 200000
	$(BIN)/python benchmarks/bench_spark.py

clean:
	rm -rf build .pytest_cache
