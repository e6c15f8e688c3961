"""The objective as the objectives page builds it: next-token cross-entropy, by
hand and fused, its units, and the entropy rate of a Markov chain, the lowest loss
any model can reach on the text the chain writes.

Plain torch, and only what that page explains: no input checks (the package's
snippets.core.objectives computes the same loss and names a bad target).
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
    "entropy_rate",
]

# --8<-- [start:ignore_index]
# A target equal to this adds nothing to the loss: the mark for padding. -100 is the
# default of torch's cross_entropy, and no real token id is negative.
IGNORE_INDEX = -100
# --8<-- [end:ignore_index]


# --8<-- [start:by_hand]
def cross_entropy_by_hand(logits, targets, ignore_index=IGNORE_INDEX):
    """Mean of -ln p(target) over the positions whose target is not ignore_index.

    logits (B, T, V), targets (B, T) -> a scalar tensor, in nats per token.
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
def lm_loss(logits, targets, ignore_index=IGNORE_INDEX):
    """The same mean, fused: logits (B, T, V), targets (B, T) -> a scalar tensor."""
    B, T, V = logits.shape
    # cross_entropy takes (N, V) scores and (N,) targets: each of the B*T positions
    # is one classification example, and the loss is the mean over them.
    return F.cross_entropy(
        logits.reshape(B * T, V), targets.reshape(B * T), ignore_index=ignore_index
    )


# --8<-- [end:lm_loss]


# --8<-- [start:metrics]
def perplexity(loss) -> float:
    """exp(loss): as unsure as a uniform choice among this many tokens."""
    return math.exp(float(loss))


def bits_per_character(loss, n_tokens: int, n_chars: int) -> float:
    """A loss in nats per token, as bits per character of the text encoded."""
    # Per-token losses of two tokenizers do not compare (a longer token is harder
    # to guess); per character of the same text, they do.
    return float(loss) * n_tokens / n_chars / math.log(2)


# --8<-- [end:metrics]


# --8<-- [start:entropy_rate]
def entropy_rate(P):
    """H = -sum_i pi_i sum_j P_ij ln P_ij, in nats per step, of the chain P (n, n).

    P[i, j] is the probability that state j follows state i; pi, with pi = pi P,
    holds how often each state occurs in a long run of the chain.
    """
    n = P.size(0)
    pi = torch.full((n,), 1 / n, dtype=P.dtype)  # any start will do: uniform
    for _ in range(1000):  # each step runs the chain once more: pi -> pi P
        pi = pi @ P  # (n,) @ (n, n) -> (n,)
    # xlogy(P, P) is P ln P, taken as 0 where P is 0 (j never follows i).
    return -(pi * torch.special.xlogy(P, P).sum(dim=-1)).sum()


# --8<-- [end:entropy_rate]
