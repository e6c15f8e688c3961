"""Instruments for what code costs on a CPU: time, peak tensor memory, page faults.

Written for Linux; elsewhere the timing runs without measuring how busy the
machine is, and page faults are counted where the resource module exists.
"""

# --8<-- [start:imports]
import contextlib
import os
import resource
import sys
import time
from pathlib import Path

from torch.profiler import ProfilerActivity, profile

# --8<-- [end:imports]

__all__ = ["peak_memory", "page_faults", "waiting_seconds", "time_interleaved"]


# --8<-- [start:peak_memory]
@contextlib.contextmanager
def _stderr_silenced():
    """The profiler logs a line to file descriptor 2 when it starts and stops."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_memory(fn) -> dict:
    """Run fn() once and measure the tensor memory it needs.

    With profile_memory=True, torch's CPU allocator reports every allocation and
    free to the profiler. Replayed in time order, the events give the bytes of
    tensors alive at each moment, counted from what was alive before fn().

    Args:
        fn (Callable): a function of no arguments.

    Returns:
        {"peak_bytes": the most bytes alive at once,
            "largest_allocation_bytes": the largest single allocation}.
    """
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _stderr_silenced():
        prof.start()
    try:
        fn()
    finally:
        with _stderr_silenced():
            prof.stop()
    # The raw event list keeps the timeline; prof.events() would instead add each
    # allocation to the operator that made it.
    events = prof.profiler.kineto_results.events()
    events = [e for e in events if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_ns())  # stable: ties keep recorded order
    live = peak = largest = 0
    for event in events:
        live += event.nbytes()  # > 0 for an allocation, < 0 for a free
        peak = max(peak, live)
        largest = max(largest, event.nbytes())
    return {"peak_bytes": peak, "largest_allocation_bytes": largest}


# --8<-- [end:peak_memory]


# --8<-- [start:page_faults]
def page_faults(fn) -> int:
    """Run fn() once; return the minor page faults it caused.

    A minor fault is the first touch of a page the process got from the
    operating system: the kernel maps a zeroed page there, which takes time.

    Args:
        fn (Callable): a function of no arguments.
    """
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt  # all threads
    fn()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


# --8<-- [end:page_faults]


# --8<-- [start:timing]
MAX_WAITED = 0.05  # a run whose threads waited longer for a CPU is taken again


def waiting_seconds() -> float:
    """Seconds this process's threads spent ready to run but waiting for a CPU.

    Linux counts it per thread in /proc/self/task/*/schedstat (second field, ns);
    elsewhere this returns 0 and no run is ever taken again.
    """
    total = 0
    for stat in Path("/proc/self/task").glob("*/schedstat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int(stat.read_text().split()[1])
    return total / 1e9


def time_interleaved(
    jobs: dict, repetitions: int, warmup: int = 0, prepare=None, retries=0
) -> dict:
    """Time the jobs taking turns in rotating order: A B C, B C A, C A B, ...

    Taking turns spreads slow drifts of the machine (clock speed, other
    processes) over all jobs instead of penalising one of them. A run during
    which our threads waited for a CPU (another process had it) for more than
    MAX_WAITED of its time is taken again, up to `retries` times.

    Args:
        jobs: name -> function of no arguments.
        repetitions: rounds kept.
        warmup: rounds run first and thrown away.
        prepare (Callable | None): run before each job, outside the clock.
        retries (int): how often one run may be taken again.

    Returns:
        name -> {"seconds": [wall-clock seconds, one per kept round],
        "cpu_seconds": [CPU seconds of this process in each kept run: they do
        not count waiting while another process had the core], "waited": [the
        share of each kept run spent waiting for a CPU], "retaken": runs taken
        again}.
    """
    names = list(jobs)
    result = {
        name: {"seconds": [], "cpu_seconds": [], "waited": [], "retaken": 0}
        for name in names
    }
    for round_ in range(warmup + repetitions):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            for attempt in range(retries + 1):
                if prepare is not None:
                    prepare()
                waited_before = waiting_seconds()
                start, cpu = time.perf_counter(), time.process_time()
                jobs[name]()
                seconds = time.perf_counter() - start
                cpu = time.process_time() - cpu
                waited = waiting_seconds() - waited_before
                waited = max(0.0, waited) / max(seconds, 1e-9)  # share of the run
                if waited <= MAX_WAITED or attempt == retries:
                    break
                result[name]["retaken"] += 1
            if round_ >= warmup:
                result[name]["seconds"].append(seconds)
                result[name]["cpu_seconds"].append(cpu)
                result[name]["waited"].append(waited)
    return result


# --8<-- [end:timing]
