# Every target creates .venv on first use; nothing needs installing by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[test,tfds]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/et-ode demo

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile -q

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# The documentation site (mkdocs-material + mkdocstrings) into site/; --strict fails on any
# broken API reference or link. Installs the docs extra into .venv on first use.
DOCS_STAMP := $(VENV)/.installed-docs

$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install --quiet -e ".[docs]"
	touch $(DOCS_STAMP)

.PHONY: docs
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) .pytest_cache
