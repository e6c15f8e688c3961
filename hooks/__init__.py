"""The site build's MkDocs hooks, one job per module, each listed in mkdocs.yml's `hooks:`;
page_parser.py is no hook but the page reader the hooks and the page harness (tests/pagecheck/)
share, so that the build never imports the tests.

MkDocs loads each listed file by its path; the tests import the same files as `hooks.<name>`
(the checkout is on the path of the project's environment: see the Makefile).
"""
