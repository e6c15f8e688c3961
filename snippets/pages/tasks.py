"""Tasks that need attention, generated in code, each with its known floor.

Shape letters: B batch, L the length of a row of tokens, T sequence length, V
vocabulary.

On the guide's Markov language the next token depends only on the current one, so
attention can be ignored. On these tasks it cannot: the answer is somewhere
earlier in the row, and only attention can fetch it. Each task also says what the
best possible model scores (its floor), so a measured loss reads as a distance.

- Copy / induction (`repeated_tokens`): a random segment of distinct tokens,
  repeated until the row is full. Once a repeat has begun, every next token is
  the one that followed the current token's earlier occurrence.
- Multi-query associative recall, MQAR (`mqar`, after Arora et al. 2023,
  arXiv:2312.04927): key-value pairs, then more pairs whose keys were seen
  before; the value of a seen key is the one it had the first time.
- Bigram-Backcopy (`bigram_backcopy`, after Guo et al. 2024): a Markov chain with
  a BOS token, and trigger tokens after which the token before the trigger repeats.
"""

# --8<-- [start:imports]
import math

import torch

# --8<-- [end:imports]

__all__ = [
    "IGNORE",
    "repeated_tokens",
    "copy_targets",
    "copy_floor",
    "mqar",
    "mqar_floor",
    "BOS",
    "backcopy_chain",
    "bigram_backcopy",
    "backcopy_best_losses",
]

IGNORE = -100  # a target that adds nothing to the loss (lm_loss's ignore_index)


# --8<-- [start:copy]
def repeated_tokens(
    batch_size: int,
    length: int,
    vocab_size: int,
    min_period: int,
    max_period: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """(B, length) token ids: in each row, a random segment repeated until full.

    A segment holds `period` distinct tokens, period drawn from
    [min_period, max_period] per row (always min_period if max_period is None),
    so each token of a later repeat has exactly one earlier occurrence per repeat.

    Args:
        batch_size: B, the number of rows.
        length: the number of tokens in a row.
        vocab_size: V; ids are drawn from [0, V).
        min_period: the shortest segment.
        max_period: the longest segment; None means min_period.
        generator: the source of randomness; None uses torch's global one.

    Returns:
        Token ids (B, length).

    Raises:
        ValueError: unless 1 <= min_period <= max_period <= vocab_size.
    """
    max_period = min_period if max_period is None else max_period
    if not 1 <= min_period <= max_period <= vocab_size:
        raise ValueError(
            f"need 1 <= min_period ({min_period}) <= max_period ({max_period}) "
            f"<= vocab_size ({vocab_size})"
        )
    # A random permutation per row: its first `period` entries are distinct.
    noise = torch.rand(batch_size, vocab_size, generator=generator)  # (B, V)
    perm = noise.argsort(dim=-1)  # (B, V)
    shape = (batch_size, 1)
    period = torch.randint(min_period, max_period + 1, shape, generator=generator)
    where = torch.arange(length) % period  # (B, length): index within the segment
    return perm.gather(1, where)  # (B, length)


def copy_targets(tokens: torch.Tensor) -> torch.Tensor:
    """Which next tokens a perfect copier knows: (B, L - 1) booleans.

    Target i (the token at i + 1) is known once the repeat has begun: both it and
    the token before it occurred earlier in the row. The first token of the
    second copy is not known in advance (the period could have been longer).

    Args:
        tokens: (B, L) rows from repeated_tokens.

    Returns:
        (B, L - 1) bool, True where the target tokens[:, i + 1] is determined.
    """
    L = tokens.size(1)
    same = tokens.unsqueeze(2) == tokens.unsqueeze(1)  # (B, L, L): i sees j's token
    earlier = torch.ones(L, L, dtype=torch.bool).tril(-1)  # j < i
    seen = (same & earlier).any(dim=2)  # (B, L): tokens[:, i] occurred before
    return seen[:, 1:] & seen[:, :-1]  # (B, L - 1)


def copy_floor(
    length: int, vocab_size: int, min_period: int, max_period: int
) -> float:
    """The lowest mean loss (nats) any model can reach on all `length` targets of
    rows of length + 1 tokens: the unknown first segment costs, the repeats not.

    While the first segment lasts, i distinct tokens have been seen; the next is
    the first token again with probability h = P(period = i | period >= i), else
    one of the V - i unseen tokens, all equally likely. Once the period is known,
    every target is certain: 0 nats.

    Raises:
        ValueError: unless 1 <= min_period <= max_period <= vocab_size, length >= 1.
    """
    if not 1 <= min_period <= max_period <= vocab_size or length < 1:
        raise ValueError(
            f"need length ({length}) >= 1 and 1 <= min_period ({min_period}) "
            f"<= max_period ({max_period}) <= vocab_size ({vocab_size})"
        )
    periods = range(min_period, max_period + 1)
    total = 0.0
    for i in range(1, length + 1):  # target i: tokens[:, i] from tokens[:, :i]
        alive = sum(p >= i for p in periods) / len(periods)  # P(period >= i)
        if alive == 0:
            break
        h = sum(p == i for p in periods) / sum(p >= i for p in periods)
        loss = -h * math.log(h) if h > 0 else 0.0
        if h < 1:
            loss -= (1 - h) * math.log((1 - h) / (vocab_size - i))
        total += alive * loss
    return total / length


# --8<-- [end:copy]


# --8<-- [start:mqar]
def mqar(
    batch_size: int,
    length: int,
    n_keys: int,
    n_values: int,
    min_pairs: int,
    max_pairs: int | None = None,
    generator: torch.Generator | None = None,
    in_order: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-query associative recall: rows of key-value pairs, and their targets.

    A row is length // 2 pairs "k v". Its first `pairs` pairs (pairs drawn from
    [min_pairs, max_pairs] per row) hold distinct keys, each with a random value;
    every later pair repeats one of those keys, drawn at random, with the value it
    had. Queries and answers are interleaved (as in Zoology's training data):
    every key position is a target, so a row of 2n tokens trains n recalls.

    Keys are ids [0, n_keys), values [n_keys, n_keys + n_values): the vocabulary
    has n_keys + n_values ids.

    Args:
        batch_size: B, the number of rows.
        length: L, the tokens in a row; even.
        n_keys: the key vocabulary; at least max_pairs.
        n_values: the value vocabulary.
        min_pairs: the fewest distinct keys in a row.
        max_pairs: the most; None means min_pairs.
        generator: the source of randomness; None uses torch's global one.
        in_order: the fraction of rows whose later pairs replay the first ones in
            their order (a copy, which a model learns sooner: a curriculum can
            start high and go to 0); the others ask for keys at random.

    Returns:
        tokens (B, L) and targets (B, L): targets[:, t] is the value that follows
        the key at t, IGNORE at value positions (the next key is not asked for).
        The first time a key appears its value is a coin toss; from then on it is
        recall.

    Raises:
        ValueError: length is odd or too short for max_pairs and one query, or
            not 1 <= min_pairs <= max_pairs <= n_keys, or n_values < 1.
    """
    max_pairs = min_pairs if max_pairs is None else max_pairs
    if not 1 <= min_pairs <= max_pairs <= n_keys or n_values < 1:
        raise ValueError(
            f"need 1 <= min_pairs ({min_pairs}) <= max_pairs ({max_pairs}) "
            f"<= n_keys ({n_keys}) and n_values ({n_values}) >= 1"
        )
    if length % 2 or length < 2 * max_pairs + 2:
        raise ValueError(
            f"length ({length}) must be even and >= 2 * max_pairs + 2 "
            f"({2 * max_pairs + 2}): the pairs and at least one query"
        )
    n = length // 2  # pairs in a row
    B = batch_size
    keys = torch.rand(B, n_keys, generator=generator).argsort(dim=-1)  # (B, n_keys)
    # Slot i's key and value: the keys distinct, the values drawn freely.
    values = torch.randint(
        n_keys, n_keys + n_values, (B, n_keys), generator=generator
    )  # (B, n_keys)
    pairs = torch.randint(min_pairs, max_pairs + 1, (B, 1), generator=generator)
    # Slot j of a row: pair j < pairs introduces key j; a later one asks for a
    # random earlier slot, floor(u * pairs) with u uniform in [0, 1).
    j = torch.arange(n).expand(B, n)  # (B, n)
    asked = (torch.rand(B, n, generator=generator) * pairs).long()  # (B, n)
    replay = torch.rand(B, 1, generator=generator) < in_order  # (B, 1)
    asked = torch.where(replay, j % pairs, asked)  # replayed: slot j mod pairs
    slot = torch.where(j < pairs, j, asked)  # (B, n)
    tokens = torch.stack([keys.gather(1, slot), values.gather(1, slot)], dim=2)
    tokens = tokens.view(B, length)  # k v k v ...
    targets = torch.full((B, length), IGNORE)
    targets[:, 0::2] = tokens[:, 1::2]  # at a key: the value that follows
    return tokens, targets


def mqar_floor(length: int, n_values: int, min_pairs: int, max_pairs: int) -> float:
    """The lowest mean loss (nats) over mqar's targets: a key's first value is
    one of n_values (ln n_values nats), every repeat is certain (0 nats).

    Raises:
        ValueError: unless 1 <= min_pairs <= max_pairs <= length // 2 and
            n_values >= 1.
    """
    if not 1 <= min_pairs <= max_pairs <= length // 2 or n_values < 1:
        raise ValueError(
            f"need 1 <= min_pairs ({min_pairs}) <= max_pairs ({max_pairs}) "
            f"<= length // 2 ({length // 2}) and n_values ({n_values}) >= 1"
        )
    mean_pairs = (min_pairs + max_pairs) / 2  # the mean of a uniform draw
    return mean_pairs * math.log(n_values) / (length // 2)


# --8<-- [end:mqar]


# --8<-- [start:backcopy]
BOS = 0  # every Bigram-Backcopy sequence starts with this token, and only it


def _check_backcopy(vocab_size: int, n_triggers: int) -> None:
    if not 1 <= n_triggers <= vocab_size - 3:
        raise ValueError(
            f"n_triggers ({n_triggers}) must be in [1, vocab_size - 3 = "
            f"{vocab_size - 3}]: BOS and at least two ordinary tokens besides"
        )


def backcopy_chain(
    vocab_size: int,
    n_triggers: int,
    trigger_rate: float = 0.1,
    sharpness: float = 2.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """A random bigram chain for bigram_backcopy: transitions (V, V), rows sum to 1.

    Token 0 is BOS (never a next token), the last n_triggers ids are the
    triggers, which together get trigger_rate of every row. Each row is a
    softmax of sharpness * N(0, 1) scores: larger sharpness, a more peaked chain.
    """
    _check_backcopy(vocab_size, n_triggers)
    if not 0 < trigger_rate < 1:
        raise ValueError(f"trigger_rate ({trigger_rate}) must be in (0, 1)")
    V, first = vocab_size, vocab_size - n_triggers  # triggers: first .. V - 1
    scores = sharpness * torch.randn(V, V, generator=generator)
    scores[:, BOS] = float("-inf")  # BOS only ever opens a sequence
    ordinary = scores[:, :first].softmax(-1) * (1 - trigger_rate)  # (V, first)
    triggers = scores[:, first:].softmax(-1) * trigger_rate  # (V, n_triggers)
    return torch.cat([ordinary, triggers], dim=-1)  # (V, V)


def bigram_backcopy(
    batch_size: int,
    length: int,
    transitions: torch.Tensor,
    n_triggers: int,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Bigram-Backcopy sequences (Guo et al. 2024): token ids (B, length).

    Position 0 is BOS, position 1 an ordinary token drawn evenly. After that,
    the token following a trigger copies the token before the trigger; every
    other token follows the bigram chain. A model must look one token back
    after a trigger and needs no attention anywhere else: there its heads have
    nothing to do.
    """
    V = transitions.size(0)
    _check_backcopy(V, n_triggers)
    if length < 2:
        raise ValueError(f"length ({length}) must be >= 2: BOS and one token")
    first_trigger = V - n_triggers
    ids = torch.empty(batch_size, length, dtype=torch.long)
    ids[:, 0] = BOS
    shape = (batch_size,)
    ids[:, 1] = torch.randint(1, first_trigger, shape, generator=generator)
    for t in range(2, length):
        drawn = torch.multinomial(
            transitions[ids[:, t - 1]], 1, generator=generator
        )
        copy = ids[:, t - 1] >= first_trigger  # the last token was a trigger
        ids[:, t] = torch.where(copy, ids[:, t - 2], drawn[:, 0])
    return ids


def backcopy_best_losses(
    ids: torch.Tensor, transitions: torch.Tensor, n_triggers: int
) -> torch.Tensor:
    """What the rule itself scores on each next token: -log p, (B, T - 1).

    0 after a trigger (the copy is certain), -log transitions[prev, next]
    elsewhere; its mean is the lowest loss a model can reach.
    """
    prev, nxt = ids[:, :-1], ids[:, 1:]  # (B, T - 1) each
    losses = -transitions[prev, nxt].log()
    losses[:, 0] = torch.log(
        torch.tensor(float(transitions.size(0) - n_triggers - 1))
    )
    return torch.where(prev >= transitions.size(0) - n_triggers, 0.0, losses)


# --8<-- [end:backcopy]
