# Runs the code blocks of every page in docs/ as tests (see tests/pagecheck/).
import os

import torch

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
