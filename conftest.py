# Runs the code blocks of every page in docs/ as tests (see tests/pagecheck.py).
pytest_plugins = ["tests.pagecheck"]
