# Two front doors: `make demo` and `make test`. Each sets everything up from a fresh clone first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# CPU build of torch first: an unpinned torch would pull a multi-gigabyte CUDA build.
TORCH_SPEC ?= torch==2.13.0

.PHONY: setup demo demo-live test test-fast lint lab bench chromium trainer-sweep clean

setup: $(STAMP) chromium

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
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

test: setup
	$(PY) -m pytest

test-fast: setup
	$(PY) -m pytest -m "not slow"

# JupyterLab is an extra (about 40 packages), installed on first use rather than by every setup
lab: setup
	$(PY) -m pip install -q -e ".[notebooks]"
	$(VENV)/bin/jupyter lab notebooks/

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
	$(PY) benchmarks/command_latency.py

trainer-sweep: setup
	$(VENV)/bin/trainer-minimal sweep --presets scalerl,grpo,dapo,cispo,gspo,scalerl-bs8,scalerl-g4 \
	  --seeds 0,1,2 --out out/trainer_sweep --workers 2 --slim

clean:
	rm -rf $(VENV) demo_out .pytest_cache
