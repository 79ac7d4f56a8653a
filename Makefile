# alallo: `make run` trains the sample job live; `make test` runs the test suite.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: run test install bench clean

$(PY):
	python3 -m venv $(VENV)

# torch first, pinned: an unpinned torch would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml | $(PY)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[train,dev]'
	rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/alallo demo

test: $(STAMP)
	$(PY) -m pytest

# Every bench/bench_*.py, small sizes; one table, and bench/results.json.
bench: $(STAMP)
	$(PY) bench/run.py --quick

clean:
	rm -rf $(VENV) .alallo .pytest_cache
