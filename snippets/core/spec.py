"""Specs: the frozen dataclasses a GPTConfig holds besides its sizes.

A checkpoint stores each spec with its module and class name and imports that
module to read it back (snippets/run/checkpoint.py); a spec class is also listed
in SPECS by its name when it is defined. A LayerSpec builds the layer it
describes, counts that layer's parameters by hand and says what it needs of
the GPT around it, so a GPT builds every block's layer as spec.build(): a new
kind of layer is a new spec class in a new file, with no table to add it to.
"""

import torch.nn as nn

__all__ = ["SPECS", "Spec", "LayerSpec"]

# Every spec class by its name: the package's own, else the first of a name.
SPECS: dict[str, type] = {}


class Spec:
    """A piece of a config a checkpoint stores: a frozen dataclass, named."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__module__ == __name__:  # LayerSpec: a kind of spec, not one
            return
        if cls.__module__.startswith("snippets."):
            SPECS[cls.__name__] = cls
        else:  # a copy of a class (a reader's, a page's) does not replace it
            SPECS.setdefault(cls.__name__, cls)


class LayerSpec(Spec):
    """The spec of one block's layer (softmax, MLA, linear, ...)."""

    # the GPTConfig sizes this layer's must equal: weights stack across blocks
    # (a linear layer's state may have heads of its own: its spec says n_embed)
    gpt_sizes = ("n_embed", "n_head")

    def check_in_gpt(self, i: int, config) -> None:
        """Raise if this spec cannot be block i's layer of a GPT of config."""
        for name in self.gpt_sizes:
            if getattr(self, name) != getattr(config, name):
                raise ValueError(
                    f"layers[{i}].{name} ({getattr(self, name)}) must be "
                    f"{name} ({getattr(config, name)})"
                )
        if getattr(self, "kv_source", None) is not None:
            raise ValueError(
                f"layers[{i}].kv_source ({self.kv_source}): a GPT's layers keep "
                f"their own keys and values (a sharing layer needs a cache even "
                f"for one pass)"
            )

    def build(self) -> nn.Module:
        """The layer this spec describes, newly initialised."""
        raise NotImplementedError(f"{type(self).__name__} has no build()")

    def parameters(self) -> int:
        """The parameters of build(), counted by hand."""
        raise NotImplementedError(f"{type(self).__name__} has no parameters()")
