# The commands of the README. Each creates the virtual environment on first use.
#   make serve      preview the site at http://127.0.0.1:8000 (rebuilds when docs/, snippets/ or lab/ change)
#   make test-page  one page: its blocks, its download, its browser checks (PAGE=docs/x.md)
#   make test-fast  every test but the portability reruns and the browser (about 2½ minutes on 2 quiet cores)
#   make build      the strict build into site/, as CI's deploy runs it
#   make test       the whole test suite: what CI runs

VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
export NO_MKDOCS_2_WARNING := 1

.PHONY: serve test test-fast test-page test-latest build clean

$(BIN)/.installed: requirements.txt pyproject.toml tools/package-lock.json
	@command -v npm >/dev/null || { echo "Node.js and npm are needed: the build typesets the \
	math with MathJax on Node (apt-get install nodejs npm)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	# The reader's package (snippets), editable; and the checkout on the path (a .pth file in
	# the venv), so that lab, hooks and tests import from this folder too.
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	echo "$(CURDIR)" > "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/attention-guide-checkout.pth"
	npm ci --prefix tools --silent --no-audit --no-fund
	touch $@

serve: $(BIN)/.installed
	$(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

test: $(BIN)/.installed
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The quick loop over everything: the modules, every page's blocks, the strict build and the
# downloads; not the pages' reruns under other CPU settings, not the browser.
test-fast: $(BIN)/.installed
	$(BIN)/python -m pytest -m "not browser and not portability" $(PYTEST_ARGS)

# One page, for a contributor's loop: its blocks, its download and its browser checks, side by
# side (tests/browser/one_page.py): make test-page PAGE=docs/attention.md
test-page: $(BIN)/.installed
	@test -n "$(PAGE)" || { echo "make test-page PAGE=docs/<page>.md"; exit 2; }
	$(BIN)/python -m tests.browser.one_page $(PAGE)

# Drift guard (weekly workflow): the suite against the newest releases, in a separate venv,
# with the newest MathJax 3 in tools/ and the newest Mermaid vendored into docs/ (this
# rewrites docs/assets/vendor/ in the working tree: CI's checkout is thrown away).
# MathJax 4 is another package (@mathjax/src) with another API: its version is printed so
# that a maintainer sees when it moves.
test-latest:
	$(PYTHON) -m venv .venv-latest
	.venv-latest/bin/python -m pip install --quiet -r requirements.txt
	.venv-latest/bin/python -m pip install --quiet --no-deps -e .
	echo "$(CURDIR)" > "$$(.venv-latest/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/attention-guide-checkout.pth"
	.venv-latest/bin/python -m pip install --quiet --upgrade torch mkdocs-material \
		pymdown-extensions mkdocs-jupyter mkdocstrings-python
	npm ci --prefix tools --silent --no-audit --no-fund
	npm install --prefix tools --no-save --silent --no-audit --no-fund mathjax-full@latest
	MERMAID=latest scripts/vendor-js.sh
	.venv-latest/bin/python -m pip list | grep -iE "^(torch|mkdocs-material|pymdown-extensions) "
	@echo "mathjax-full $$(node -p "require('./tools/node_modules/mathjax-full/package.json').version")," \
		"newest MathJax: $$(npm view @mathjax/src version)"; cat docs/assets/vendor/VERSIONS
	.venv-latest/bin/python -m pytest $(PYTEST_ARGS)

build: $(BIN)/.installed
	$(BIN)/mkdocs build --strict

clean:
	rm -rf site .pytest_cache
