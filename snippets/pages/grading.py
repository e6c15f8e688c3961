"""How an exercise's answer is run and compared: what snippets.pages.exercises uses.

A grader runs the learner's function through `run`, which turns anything it raises
into `Raised` with the error and the shapes it was given; checks what came back
with `tensor` (a tensor, of this shape) and `close`; and reads a bool mask's first
wrong entry, in a learner's words, with `mask_problem`. Its inputs are seeded
(`qkv`) or spell their own index (`coded`), so grading is the same on every run.
A grader returns None when every property holds, else the first one broken.

"""

import torch

__all__ = [
    "Raised",
    "shapes",
    "run",
    "close",
    "tensor",
    "mask_problem",
    "qkv",
    "coded",
]


class Raised(Exception):
    """Grading stopped: carries the message for the learner (the answer raised,
    or returned something of the wrong kind or shape)."""


def shapes(args) -> str:
    """What an answer was given, as a learner needs it: tensors by their shapes."""

    def one(a):
        if isinstance(a, torch.Tensor):
            return f"tensor {tuple(a.shape)}"
        if isinstance(a, tuple | list):
            return f"({shapes(a)})"
        return repr(a)

    return ", ".join(one(a) for a in args)


def run(answer, *args, **kwargs):
    """answer(*args, **kwargs); what it raises becomes Raised, with the shapes."""
    try:
        return answer(*args, **kwargs)
    except Exception as error:  # the learner's error, shown, never hidden
        given = shapes([*args, *kwargs.values()])
        raise Raised(
            f"your function raised {type(error).__name__}: {error} (given {given})"
        ) from None


def close(a, b, atol=1e-5) -> bool:
    """a is a tensor of b's shape with b's values (to atol, in float64)."""
    return (
        isinstance(a, torch.Tensor)
        and a.shape == b.shape
        and torch.allclose(a.double(), b.double(), atol=atol)
    )


def tensor(out, shape, what: str) -> torch.Tensor:
    """out, if it is a tensor of this shape; else Raised, naming `what` it is."""
    if not isinstance(out, torch.Tensor):
        raise Raised(f"return a torch.Tensor ({what}), got {type(out).__name__}")
    if tuple(out.shape) != tuple(shape):
        raise Raised(
            f"{what} should have shape {tuple(shape)}, got {tuple(out.shape)}"
        )
    return out


def mask_problem(mask, want, what: str) -> str | None:
    """The first difference of two (T, T) bool masks, in a learner's words."""
    if mask.dtype != torch.bool:
        return (
            f"{what} should be a bool tensor (True = may attend), got "
            f"{mask.dtype}: a float mask is added to the scores, it hides nothing"
        )
    if torch.equal(mask, want.T) and not torch.equal(mask, want):
        return (
            f"{what} is the transpose of the right one: "
            "rows are queries, columns keys"
        )
    for i, j in (mask & ~want).nonzero().tolist():
        if j > i:
            return (
                f"row {i} may see position {j}, a later one: nothing may look ahead"
            )
        return f"row {i} may see position {j}, which it must not"
    for i, j in (~mask & want).nonzero().tolist():
        if i == j:
            return (
                f"row {i} cannot see position {i} itself: a "
                "token may attend to itself"
            )
        return f"row {i} cannot see position {j}, an earlier one it should see"
    return None


def qkv(seed: int, T_q: int, T_k: int, D: int = 8):
    """Seeded queries (2, 2, T_q, D), keys and values (2, 2, T_k, D)."""
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(2, 2, n, D, generator=g) for n in (T_q, T_k, T_k))


def coded(*sizes) -> torch.Tensor:
    """A float64 tensor whose entries spell their index, one digit a dim (each size
    at most 10): coded(2, 3, 8)[b, t, c] is 100 b + 10 t + c. A layout mistake
    shows in the digits: which position or channel ended up where."""
    grid = torch.meshgrid(*(torch.arange(n) for n in sizes), indexing="ij")
    return sum(g * 10 ** (len(sizes) - 1 - k) for k, g in enumerate(grid)).double()
