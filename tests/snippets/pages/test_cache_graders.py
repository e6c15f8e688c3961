"""Tests for snippets/pages/cache_graders.py: the graders of the two cache exercises pass the
guide's own functions, name what a wrong answer breaks, and are what `check` runs. Every
mistake's message is tested through `check` in tests/snippets/pages/test_exercises.py."""

import torch

import snippets.pages.exercises as exercises
from snippets.pages.cache_graders import grade_block_slots, grade_kv_cache_step
from snippets.run.paged import block_slots
from tests.snippets.pages.test_exercises import kv_cache_step


def test_the_guides_own_functions_pass():
    assert grade_block_slots(block_slots) is None
    assert grade_kv_cache_step(kv_cache_step) is None


def test_a_block_table_read_one_entry_late_is_named_by_its_first_wrong_position():
    def late(table, positions, block_size):  # entry p // block_size + 1: off by one
        entry = (positions // block_size + 1) % table.numel()
        return table[entry] * block_size + positions % block_size

    message = grade_block_slots(late)
    # table (7, 2, 5, 0), blocks of 4, positions 13 .. 0: position 13 is entry 3, block 0.
    assert message == "position 13 should be row 1: block 0, row 1", message


def test_a_cache_step_that_forgets_the_cached_keys_is_told_so():
    def forgets(cached_k, cached_v, q, k, v):
        out, _, _ = kv_cache_step(cached_k[:, :, :0], cached_v[:, :, :0], q, k, v)
        return out, torch.cat([cached_k, k], 2), torch.cat([cached_v, v], 2)

    assert "only the new keys" in grade_kv_cache_step(forgets)


def test_check_runs_these_graders():
    assert exercises._CHECKS["block_slots"] is grade_block_slots
    assert exercises._CHECKS["kv_cache_step"] is grade_kv_cache_step
