# Every target creates .venv on first use; nothing needs installing by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean

# The packages go in with uv, installed into the venv by the venv's own pip: on the 2-core
# CPU uv installed all of this in 11 s with uv's download cache warm and 15.5 s cold,
# where pip took 25 s (2026-11-26; docs/lab-notes.md, "Run times of the commands").
# Where uv cannot be installed or fails, the venv's pip installs the same (the fallback).
# Neither compiles bytecode up front (uv's default, pip's --no-compile): Python compiles
# only the modules it imports, on first import, instead of every file of every package.
# That bytecode must then be written: an environment with PYTHONDONTWRITEBYTECODE set (as
# some CI images have) would compile jax, scipy and matplotlib again in every process,
# about 2.7 s each on the 2-core CPU, and the suite starts more than fifteen (two
# workers, the command line, the installed wheel...). `PYTHON_BYTECODE` writes it.
PYTHON_BYTECODE := env -u PYTHONDONTWRITEBYTECODE
EXTRAS := .[test,tfds,docs]
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	( $(BIN)/pip install --quiet uv \
	  && $(BIN)/uv pip install --quiet --python $(BIN)/python -e "$(EXTRAS)" ) \
	|| $(BIN)/pip install --quiet --no-compile -e "$(EXTRAS)"
	touch $(STAMP)

demo: $(STAMP)
	$(PYTHON_BYTECODE) $(BIN)/et-ode demo

# Two workers, one module at a time, the longest first (and test_install.py with
# test_cli.py): see tests/conftest.py.
test: $(STAMP) lint
	$(PYTHON_BYTECODE) $(BIN)/python -m pytest -n 2 --dist loadfile -q

# ruff's formatter (checked: `ruff format .` applies it) and linter on the whole
# repository, with the settings of pyproject.toml ([tool.ruff]); `make test` runs it first.
.PHONY: lint
lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(MAKE) --no-print-directory typecheck

# mypy on the whole tree: `et_ode` as it installs, the benchmarks, the paper's figure
# scripts and the tests. solvers/ and analysis/ sit at the root of the repository but
# install as et_ode.solvers and et_ode.analysis (pyproject.toml's package-dir), which
# mypy cannot follow, so a tree of links in .venv lays them out as the installed package,
# beside links to benchmarks/ and paper_figures/. The tests import each other as
# top-level modules (`from conftest import ...`): a second run checks them as files, on
# the first run's cache.
TYPECHECK_TREE := $(VENV)/typecheck
MYPY := $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml
.PHONY: typecheck
typecheck: $(STAMP)
	rm -rf $(TYPECHECK_TREE)/et_ode $(TYPECHECK_TREE)/benchmarks $(TYPECHECK_TREE)/paper_figures
	mkdir -p $(TYPECHECK_TREE)/et_ode
	ln -s $(CURDIR)/et_ode/* $(TYPECHECK_TREE)/et_ode/
	ln -s $(CURDIR)/solvers $(CURDIR)/analysis $(TYPECHECK_TREE)/et_ode/
	ln -s $(CURDIR)/benchmarks $(CURDIR)/paper_figures $(TYPECHECK_TREE)/
	cd $(TYPECHECK_TREE) && $(MYPY) -p et_ode -p benchmarks -p paper_figures
	cd $(TYPECHECK_TREE) && MYPYPATH=$(CURDIR)/tests $(MYPY) $(CURDIR)/tests/*.py

# The fuzz suite with a large budget (tests/test_fuzz.py; make test runs 40 examples per
# property): Hypothesis's statistics, then a table of the inputs tried, accepted, checked and
# refused per entry point, with the overall line (6 min 56 s on 2 cores on 2026-12-03:
# docs/reliability.md, "Fuzzing").
.PHONY: fuzz
fuzz: $(STAMP)
	ET_ODE_FUZZ_EXAMPLES=4000 $(BIN)/python -m pytest -q -p no:xdist tests/test_fuzz.py \
		--hypothesis-show-statistics

# Every benchmark row (benchmarks/; docs/benchmarks.md): prints a table and writes a record
# into benchmarks/records/, which the benchmarks page renders once committed. Without a GPU
# the landscape and long_horizon rows run at their quick sizes, so that it finishes on a
# 2-core CPU (its record states how long it took); `python -m benchmarks --size full`.
bench: $(STAMP)
	$(BIN)/python -m benchmarks

# The figures of the how-to pages (docs/images/*.png, each at most 60 kB): the command
# line and paper_figures/ on the shipped models with small inputs (docs/make_figures.py;
# several minutes on 2 cores). `make docs-figures NAMES="convergence fig2-positions"`
# renders some of them.
.PHONY: docs-figures
docs-figures: $(STAMP)
	$(BIN)/python docs/make_figures.py $(NAMES)

# The documentation site (mkdocs-material + mkdocstrings) into site/; --strict fails on any
# broken API reference or link (tests/test_docs.py builds it too, so make test checks it).
.PHONY: docs
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

# The project's programs compiled for NVIDIA H100s on this machine, with no GPU
# (tests/test_gpu_compile*.py, tests/_deviceless.py; docs/how-to/devices.md): a venv of
# its own, .venv-cuda, with the `cuda` extra at .venv's JAX version (JAX's CUDA 12 plugin
# and NVIDIA's libraries, about 4 GB; in .venv, JAX would look for a GPU in every
# process). The plugin's check of the CUDA libraries against a driver is skipped (there
# is none); equinox's run-time errors become NaN fills (they are host callbacks, which
# cannot be compiled for an absent device); the suite's XLA settings and compilation
# cache are left out, so that this compiles for the GPU as a user's run would.
CUDA_VENV := .venv-cuda
CUDA_STAMP := $(CUDA_VENV)/.installed
$(CUDA_STAMP): $(STAMP)
	$(PYTHON) -m venv $(CUDA_VENV)
	jax=$$($(BIN)/python -c 'import jax; print(jax.__version__)') \
	&& ( ( $(BIN)/uv --version >/dev/null 2>&1 \
	       && $(BIN)/uv pip install --quiet --python $(CUDA_VENV)/bin/python \
	            -e ".[test,cuda]" "jax==$$jax" ) \
	     || $(CUDA_VENV)/bin/pip install --quiet --no-compile -e ".[test,cuda]" "jax==$$jax" )
	$(CUDA_VENV)/bin/python -c 'import jax_plugins.xla_cuda12'
	touch $(CUDA_STAMP)

.PHONY: gpu-compile
gpu-compile: $(CUDA_STAMP)
	ET_ODE_GPU_COMPILE=1 EQX_ON_ERROR=nan JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 \
	  ET_ODE_TEST_XLA_DEFAULTS=1 JAX_ENABLE_COMPILATION_CACHE=false $(PYTHON_BYTECODE) \
	  $(CUDA_VENV)/bin/python -m pytest -p no:cacheprovider -q -s \
	  tests/test_gpu_compile.py tests/test_gpu_compile_programs.py

clean:
	rm -rf $(VENV) $(CUDA_VENV) .pytest_cache
