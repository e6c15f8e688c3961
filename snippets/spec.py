"""Specs: the frozen dataclasses a GPTConfig holds besides its sizes.

A spec class is listed in SPECS by its name when it is defined, which is how
a checkpoint's config is read back (snippets/checkpoint.py). A LayerSpec also
builds the layer it describes and counts that layer's parameters by hand, so
a GPT builds every block's layer as spec.build(): a new kind of layer is a
new spec class, with no table to add it to.
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

    def build(self) -> nn.Module:
        """The layer this spec describes, newly initialised."""
        raise NotImplementedError(f"{type(self).__name__} has no build()")

    def parameters(self) -> int:
        """The parameters of build(), counted by hand."""
        raise NotImplementedError(f"{type(self).__name__} has no parameters()")
