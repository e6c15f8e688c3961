# Runs the code blocks of every page in docs/ as tests (see tests/pagecheck/).
import os

# Every process the suite starts inherits these (set before torch loads its OpenMP runtime).
# OMP_WAIT_POLICY=PASSIVE: a thread waiting at a barrier sleeps instead of spinning; the suite's
# processes share two cores, and the lab commands, training runs and page reruns it starts on
# two threads each spun through their waits (a quick run took 11.5 s of CPU beside a busy
# machine, 7.6 s passive). TORCHINDUCTOR_COMPILE_THREADS=1: torch.compile compiles in the
# process instead of starting a pool of compile workers, each importing torch again. Neither
# changes what is computed: same threads, same kernels, same order of sums.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import torch  # noqa: E402

pytest_plugins = ["tests.pagecheck.plugin", "tests.xdist_scheduling", "tests.suite_time"]

# The suite's tensors are tiny: torch's intra-op thread pool costs more than it saves, and the
# xdist workers already take every core. GUIDE_TORCH_THREADS=2 runs on two threads instead, as a
# reader's notebook would: tests/pages/test_portability.py runs the pages' blocks that way, to
# prove their outputs hold.
torch.set_num_threads(int(os.environ.get("GUIDE_TORCH_THREADS", "1")))


def pytest_report_header(config):
    # tests/pages/test_portability.py reads this line to check that its CPU setting took effect.
    return (
        f"torch {torch.__version__}: CPU capability {torch.backends.cpu.get_cpu_capability()}, "
        f"{torch.get_num_threads()} threads"
    )
