# Two front doors: `make demo` and `make test`. Each sets everything up from a fresh clone first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# CPU build of torch first: an unpinned torch would pull a multi-gigabyte CUDA build. The pin
# finds the CPU wheel where pip's configured sources hold one (this project's machines); on
# plain PyPI it is the CUDA build, so elsewhere give PyTorch's CPU index:
#   make setup TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=

.PHONY: help setup demo demo-live test test-all lint lab bench chromium trainer-sweep clean

help:
	@echo "make demo        set up, fit the shipped sweep, print the plan, write demo_out/report.html"
	@echo "make test        set up, run the test suite without the slow-marked tests (CPU only; TEST_WORKERS=2 processes); CI runs it"
	@echo "make setup       the venv (.venv), CPU torch and the package; TORCH_INDEX=URL for a torch index"
	@echo "make demo-live   train a short sweep with trainer_minimal, then forecast it"
	@echo "make test-all    the whole suite, the slow-marked tests too (those 11 alone: 5.3 min on 2 cores)"
	@echo "make lint        ruff"
	@echo "make lab         install JupyterLab (the notebooks extra) and open notebooks/"
	@echo "make bench       every benchmark that needs no GPU (long)"
	@echo "make trainer-sweep  the shipped 7 recipes x 3 seeds sweep, into out/trainer_sweep"
	@echo "make clean       remove the venv, demo output and caches"

setup: $(STAMP) chromium

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

# Headless Chromium renders the planning report in a test. Installed from Debian when missing.
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { if [ "$$(id -u)" = "0" ]; then (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || echo "warning: chromium not installed; the report screenshot test will be skipped"; \
	    else echo "warning: chromium missing and not root; the report screenshot test will be skipped"; fi; }

demo: setup
	$(PY) -m forecast.demo

demo-live: setup
	$(PY) -m forecast.demo --live

# The suite in 2 processes (pytest-xdist): most tests keep one core busy, so on 2 cores two processes
# take little more than half of one's time (`make test`: 15.8 minutes of pytest on a fresh clone,
# 2026-12-07). Whole files to each (loadfile): a file's tests share what their fixtures fit and
# compile, and test_notebooks.py's must share one start of the notebooks. Three pairs of files that
# compile the same model structure go to one worker together (tests/conftest.py, SHARED_STRUCTURE_FILES).
# TEST_WORKERS=0 runs the suite in one process, as plain `pytest` does.
TEST_WORKERS ?= 2
TEST_PROCESSES := -n $(TEST_WORKERS) --dist loadfile

# `make test` (CI's command) leaves out the tests marked slow: long real fits and multi-rank launches,
# about 350 s of the suite's 2200 s of summed test time (2026-12-07). The project's standard: slow real-sampling
# tests are marked, and at least one real fit runs in CI; the shared `fitted` fit, the command line's
# fits and the notebooks' run in it. Run `make test-all` after changing the sampler, the compiled-model
# cache, the trainer's multi-rank resume or the shape check.
test: setup
	$(PY) -m pytest $(TEST_PROCESSES) -m "not slow"

test-all: setup
	$(PY) -m pytest $(TEST_PROCESSES)

# JupyterLab is an extra (about 40 packages), installed on first use rather than by every setup
lab: setup $(VENV)/.notebooks
	$(VENV)/bin/jupyter lab $$([ "$$(id -u)" = "0" ] && echo --allow-root) notebooks/

$(VENV)/.notebooks: pyproject.toml
	$(PY) -m pip install -q -e ".[notebooks]"
	touch $@

lint: setup
	$(PY) -m ruff check forecast trainer_minimal tests benchmarks notebooks

bench: setup
	$(PY) benchmarks/trainer_default_run.py
	$(PY) benchmarks/fit_speed.py
	$(PY) benchmarks/convergence.py
	$(PY) benchmarks/extrapolation.py
	$(PY) benchmarks/exact_likelihood.py
	$(PY) benchmarks/early_stop.py
	$(PY) benchmarks/optuna_pruner.py
	$(PY) benchmarks/fit_jitter.py
	$(PY) benchmarks/command_latency.py
	$(PY) benchmarks/cross_validation_speed.py

trainer-sweep: setup
	$(VENV)/bin/trainer-minimal sweep --presets scalerl,grpo,dapo,cispo,gspo,scalerl-bs8,scalerl-g4 \
	  --seeds 0,1,2 --out out/trainer_sweep --workers 2 --slim

clean:
	rm -rf $(VENV) demo_out .pytest_cache .ruff_cache scaling_forecast.egg-info
