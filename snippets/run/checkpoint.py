"""Checkpoints a run can resume from: written atomically, and refused when the
run resuming them would compute something else.

snippets/run/train.py writes and reads them.
"""

import dataclasses
import importlib
import os
from pathlib import Path

import torch

from snippets.core.spec import SPECS

__all__ = [
    "CHECKPOINT",
    "HISTORY",
    "save_checkpoint",
    "check_same_config",
    "config_data",
    "config_from_data",
]

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


def config_data(config) -> dict:
    """A config (a dataclass, a GPTConfig with per-layer specs too) as plain
    data that a checkpoint holds and torch.load(weights_only=True) reads back:
    each spec in it a dict of its fields, tagged with its module and class
    name ("snippets.layers.mla.MLASpec"), which config_from_data imports."""

    def data(value):
        if dataclasses.is_dataclass(value):
            fields = dataclasses.fields(value)
            tagged = {f.name: data(getattr(value, f.name)) for f in fields}
            cls = type(value)
            return {"spec": f"{cls.__module__}.{cls.__qualname__}", **tagged}
        if isinstance(value, tuple):
            return tuple(data(v) for v in value)
        return value

    return {
        f.name: data(getattr(config, f.name)) for f in dataclasses.fields(config)
    }


def config_from_data(cls, data: dict):
    """config_data's inverse: cls(**fields), every tagged spec made again. A
    tag "snippets.x.NameSpec" imports snippets.x (only the package's modules);
    a bare class name (an older checkpoint, a class defined on a page) is
    looked up in SPECS, where a spec class is listed when defined."""

    def spec_class(tag: str) -> type:
        module, _, name = tag.rpartition(".")
        if module.startswith("snippets."):
            try:
                return getattr(importlib.import_module(module), name)
            except (ImportError, AttributeError):
                pass  # moved or renamed since: try the name alone
        if name not in SPECS:
            raise ValueError(
                f"a spec named {tag!r} is not one of {sorted(SPECS)} and no "
                f"module of the package defines it"
            )
        return SPECS[name]

    def value(v):
        if isinstance(v, dict) and "spec" in v:
            fields = {k: value(x) for k, x in v.items() if k != "spec"}
            return spec_class(v["spec"])(**fields)
        if isinstance(v, (tuple, list)):
            return tuple(value(x) for x in v)
        return v

    return cls(**{name: value(v) for name, v in data.items()})
