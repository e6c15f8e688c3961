# The two commands of the README. Both create the virtual environment on first use.
#   make serve   preview the site at http://127.0.0.1:8000 (rebuilds when docs/ or snippets/ change)
#   make test    run the whole test suite: modules, every page's code blocks, the strict build

VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
export NO_MKDOCS_2_WARNING := 1

.PHONY: serve test build clean

$(BIN)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

serve: $(BIN)/.installed
	$(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

test: $(BIN)/.installed
	$(BIN)/python -m pytest $(PYTEST_ARGS)

build: $(BIN)/.installed
	$(BIN)/mkdocs build --strict

clean:
	rm -rf site .pytest_cache
