"""From a stream of token ids to batches of (x, y) windows, y shifted by one.

Shape letters: B batch, T sequence length (here context_length).
"""

# --8<-- [start:imports]
import torch

# --8<-- [end:imports]

__all__ = ["get_batch"]


# --8<-- [start:get_batch]
def get_batch(
    data: torch.Tensor,
    batch_size: int,
    context_length: int,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """B windows at random offsets of the 1-D stream data: x (B, T), y (B, T).

    x[b, t] = data[i + t] and y[b, t] = data[i + t + 1]: at every position the
    target is the token that comes next, so T + 1 tokens give T examples.

    Args:
        data: token ids (N,), an integer tensor with N >= context_length + 1.
        batch_size: B, the number of windows.
        context_length: T, the length of each window.
        generator: the random offsets' source; None uses torch's global one.

    Returns:
        x and y, each (B, T), the inputs and, shifted by one, their targets.

    Raises:
        TypeError: data is not a 1-D integer tensor.
        ValueError: a size is not a positive int, or data is shorter than T + 1.
    """
    if (
        not isinstance(data, torch.Tensor)
        or data.dtype.is_floating_point
        or data.dim() != 1
    ):
        got = (
            f"dtype {data.dtype} with shape {tuple(data.shape)}"
            if isinstance(data, torch.Tensor)
            else type(data).__name__
        )
        raise TypeError(f"data must be a 1-D integer tensor of ids, got {got}")
    sizes = {"batch_size": batch_size, "context_length": context_length}
    for name, value in sizes.items():
        if type(value) is not int or value <= 0:
            raise ValueError(f"{name} ({value!r}) must be a positive int")
    T = context_length
    if len(data) < T + 1:
        raise ValueError(
            f"data has {len(data)} tokens; a window needs context_length + 1 = "
            f"{T + 1} (T inputs and the token after the last one)"
        )
    # Window starts i in [0, len(data) - T - 1], so that i + T + 1 <= len(data).
    starts = torch.randint(len(data) - T, (batch_size,), generator=generator)
    x = torch.stack([data[i : i + T] for i in starts])  # B x (T,) -> (B, T)
    y = torch.stack([data[i + 1 : i + T + 1] for i in starts])  # B x (T,) -> (B, T)
    return x, y


# --8<-- [end:get_batch]
