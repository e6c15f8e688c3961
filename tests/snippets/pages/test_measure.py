"""Tests for snippets/pages/measure.py: the instruments of the attention-cost page and
the benchmarks.

No timing is asserted: times depend on the machine and on what else runs on it. Memory is,
because the profiler counts tensor bytes exactly and the same way on every run.
"""

import os
import time

import torch

from snippets.pages import measure
from snippets.pages.measure import page_faults, peak_memory, time_interleaved, waiting_seconds


def test_peak_memory_counts_tensors_alive_at_once():
    a = torch.zeros(1000)  # alive before: not counted

    def two_then_one():
        b = torch.ones(256)  # 1 KiB
        c = torch.ones(512)  # 2 KiB, both alive: 3 KiB
        del b, c
        d = torch.ones(128)  # 0.5 KiB
        del d

    assert peak_memory(two_then_one) == {"peak_bytes": 3072, "largest_allocation_bytes": 2048}
    assert a.sum() == 0


def test_page_faults_count_fresh_pages():
    # Fresh pages from the system: far above glibc's mmap threshold, and above what its heap
    # may keep after earlier frees. glibc raises the threshold to the size of a freed mmap'd
    # block (up to 32 MiB) and then keeps up to twice that at the top of the heap; a 64 MiB
    # request after the attention-cost tests came from there, already touched: 0 faults.
    n_bytes = 256 * 2**20
    faults = page_faults(lambda: torch.ones(n_bytes // 4))
    assert faults >= n_bytes // os.sysconf("SC_PAGE_SIZE") // 2
    assert page_faults(lambda: None) < 100


def test_time_interleaved_rotates_and_drops_warmup():
    order = []
    jobs = {name: (lambda name=name: order.append(name)) for name in "ABC"}
    timed = time_interleaved(jobs, repetitions=3, warmup=1)
    assert "".join(order) == "ABC" + "BCA" + "CAB" + "ABC"
    for result in timed.values():
        assert len(result["seconds"]) == len(result["cpu_seconds"]) == len(result["waited"]) == 3
        assert min(result["seconds"]) >= 0 and min(result["waited"]) >= 0
        assert result["retaken"] == 0


def test_time_interleaved_takes_a_run_again_when_it_waited(monkeypatch):
    clock = iter([0.0, 1.0, 1.0, 1.0])  # waiting_seconds before and after each run
    monkeypatch.setattr(measure, "waiting_seconds", lambda: next(clock))
    timed = time_interleaved({"A": lambda: None}, 1, 0, retries=1)
    assert timed["A"]["retaken"] == 1 and timed["A"]["waited"] == [0.0]


def test_waiting_seconds_is_a_running_total():
    first = waiting_seconds()
    assert 0 <= first <= waiting_seconds()


def test_cpu_seconds_do_not_count_sleeping():
    timed = time_interleaved({"sleep": lambda: time.sleep(0.05)}, repetitions=1)
    (wall,), (cpu,) = timed["sleep"]["seconds"], timed["sleep"]["cpu_seconds"]
    assert wall >= 0.05 and cpu < 0.02
