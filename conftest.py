# Runs the code blocks of every page in docs/ as tests (see tests/pagecheck.py).
import torch

pytest_plugins = ["tests.pagecheck"]

# The suite's tensors are tiny: torch's intra-op thread pool costs more than it saves, and on a
# loaded 2-core machine (CI also drives a browser) it made the suite 3-4x slower. Printed
# outputs on the pages are rounded, and were checked to match with one thread and with two.
torch.set_num_threads(1)
