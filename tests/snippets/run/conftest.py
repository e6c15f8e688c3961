"""Fixtures of the tests of snippets/run/: `recording`, generate_batch's caches as it makes
them (tests/snippets/run/paged_models.py), for test_paged.py and test_serving.py."""

from tests.snippets.run.paged_models import recording  # noqa: F401  (a fixture, by name)
