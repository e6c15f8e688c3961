"""Checkpoints a run can resume from: written atomically, and refused when the
run resuming them would compute something else.

Needs torch. snippets/train.py writes and reads them.
"""

import dataclasses
import os
from pathlib import Path

import torch

__all__ = ["CHECKPOINT", "HISTORY", "save_checkpoint", "check_same_config"]

CHECKPOINT = "ckpt.pt"  # the files a run writes into its out folder
HISTORY = "history.json"


# --8<-- [start:checkpoint]
def save_checkpoint(state: dict, path: Path) -> None:
    """torch.save to a temporary file, then rename it over the checkpoint.

    os.replace is atomic: whoever reads path, a resumed run after a crash or a
    Ctrl-C in the middle of a save, finds the old checkpoint or the new one,
    never half of one.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())  # the bytes on disk before the name points at them
    os.replace(tmp, path)


# --8<-- [end:checkpoint]


# Fields that may change between a run and its resumption: none of them changes
# what the run computes.
RESUMABLE = ("compile",)


def check_same_config(saved: dict, config) -> None:
    """A resumed run must compute what the interrupted one would have: every
    field of config (a dataclass) as saved, but those in RESUMABLE."""
    for name, value in dataclasses.asdict(config).items():
        if name not in RESUMABLE and saved.get(name) != value:
            raise ValueError(
                f"cannot resume: the checkpoint was made with {name}="
                f"{saved.get(name)!r}, this run has {name}={value!r}"
            )
