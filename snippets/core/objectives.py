"""The next-token objective: cross-entropy over all B*T positions, and its units.

Shape letters: B batch, T sequence length, V vocabulary size.
"""

# --8<-- [start:imports]
import math

import torch
import torch.nn.functional as F

# --8<-- [end:imports]

__all__ = [
    "IGNORE_INDEX",
    "cross_entropy_by_hand",
    "lm_loss",
    "perplexity",
    "bits_per_character",
]

# --8<-- [start:ignore_index]
# A target equal to this adds nothing to the loss: the mark for padding. -100 is the
# default of torch's cross_entropy, and no real token id is negative.
IGNORE_INDEX = -100
# --8<-- [end:ignore_index]


# --8<-- [start:by_hand]
def cross_entropy_by_hand(
    logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = IGNORE_INDEX
) -> torch.Tensor:
    """Mean of -ln p(target) over the positions whose target is not ignore_index.

    lm_loss's number, step by step; it does not check its input.

    Args:
        logits: scores (B, T, V).
        targets: next-token ids (B, T); ignore_index marks positions to leave out.
        ignore_index: the target value that adds nothing to the loss.

    Returns:
        A scalar tensor, in nats per token.
    """
    # ln(softmax) in one step, as logits - logsumexp(logits): exp(logits) could
    # overflow, and the log of a probability that rounded to 0 would be -inf.
    log_probs = logits.log_softmax(dim=-1)  # (B, T, V): ln p(v) for every v
    keep = targets != ignore_index  # (B, T) bool
    # gather needs a valid index everywhere; ignored positions are dropped below.
    safe_targets = targets.masked_fill(~keep, 0)  # (B, T)
    picked = log_probs.gather(-1, safe_targets.unsqueeze(-1))  # (B, T, 1)
    nll = -picked.squeeze(-1)  # (B, T): -ln p(target), the surprise per position
    return nll[keep].mean()  # the average over the kept positions only


# --8<-- [end:by_hand]


# --8<-- [start:lm_loss]
def lm_loss(
    logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = IGNORE_INDEX
) -> torch.Tensor:
    """Mean next-token cross-entropy over all B*T positions not ignored.

    Args:
        logits: scores (B, T, V).
        targets: next-token ids (B, T), integers in [0, V) or ignore_index.
        ignore_index: the target value that adds nothing to the loss.

    Returns:
        A scalar tensor, in nats per token.

    Raises:
        ValueError: logits are not (B, T, V), targets not (B, T), or, on the
            CPU, a target is out of range or every target is ignored.
        TypeError: targets are not an integer tensor.
    """
    if not isinstance(logits, torch.Tensor) or logits.dim() != 3:
        got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else logits
        raise ValueError(f"logits must have shape (B, T, V), got {got!r}")
    if not isinstance(targets, torch.Tensor) or targets.dtype.is_floating_point:
        got = targets.dtype if isinstance(targets, torch.Tensor) else type(targets)
        raise TypeError(f"targets must be an integer tensor of ids, got {got}")
    B, T, V = logits.shape
    if targets.shape != (B, T):
        raise ValueError(
            f"targets shape {tuple(targets.shape)} must equal the logits' (B, T) "
            f"= {(B, T)}: one target per position"
        )
    # The values are read on the CPU only: on an accelerator, reading them would
    # make every training step wait for the device.
    if targets.device.type == "cpu":
        keep = targets != ignore_index  # (B, T)
        bad = keep & ((targets < 0) | (targets >= V))  # (B, T)
        if bad.any():
            b, t = bad.nonzero()[0].tolist()
            raise ValueError(
                f"target {targets[b, t].item()} at (b={b}, t={t}) is neither a "
                f"token id for vocab_size={V} nor ignore_index={ignore_index}"
            )
        if not keep.any():  # a mean over no position: torch's nan, without a word
            raise ValueError(f"every target is ignore_index ({ignore_index})")
    # cross_entropy takes (N, V) scores and (N,) targets: each of the B*T positions
    # is one classification example, and the loss is the mean over them.
    return F.cross_entropy(
        logits.reshape(B * T, V), targets.reshape(B * T), ignore_index=ignore_index
    )


# --8<-- [end:lm_loss]


# --8<-- [start:metrics]
def perplexity(loss: float) -> float:
    """exp(loss): as unsure as a uniform choice among this many tokens.

    Args:
        loss: a mean cross-entropy in nats per token (a float or a scalar tensor).

    Returns:
        The perplexity, >= 1.
    """
    return math.exp(float(loss))


def bits_per_character(loss: float, n_tokens: int, n_chars: int) -> float:
    """A loss in nats per token, as bits per character of the text encoded.

    Per-token losses of two tokenizers do not compare (a longer token is harder to
    guess); per character of the same text, they do.

    Args:
        loss: mean cross-entropy in nats per token.
        n_tokens: how many tokens the text was encoded into.
        n_chars: how many characters the text has.

    Returns:
        loss * n_tokens / n_chars / ln 2.
    """
    return float(loss) * n_tokens / n_chars / math.log(2)


# --8<-- [end:metrics]
