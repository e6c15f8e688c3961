"""The kv-heads page's MQAR models: one small GPT four ways, MHA, GQA, MQA and MLA.

2 layers of 4 query heads of D = 16 in a width of 64 (lab/recipes/mqar.py's recipe: ALiBi,
batches of 256 rows), differing only in how many key/value heads their attention
keeps, or in MLA's latent of 2 x D (as many cached numbers as MQA). Its own module, so
that the trained-model cache keys these models by what trains them (lab/model_cache.py)
and a change here re-keys no other experiment's models. Scored by lab/kv_heads_recall.py.
"""

from lab.recipes.mqar import MqarRun

WIDTH, HEADS = 64, 4
D = WIDTH // HEADS  # 16: with D = 4 or 8, MQA did not learn the lookup (the trials)
# The same 4 query heads; only what keys and values each query head reads changes.
VARIANTS = {
    "MHA": (),  # 4 key/value heads, one per query head
    "GQA": (("n_kv_head", 2),),  # 2, each shared by 2 query heads
    "MQA": (("n_kv_head", 1),),  # 1, shared by all 4
    # A latent of MQA's 2 x D, normalised (an RMSNorm after the down-projection, as
    # DeepSeek-V2 has it; without it MLA did not learn the lookup in the trials).
    "MLA": (("kv_latent", 2 * D),),
}
CACHED = ("MHA", "MQA")  # the variants whose seed-0 models lab/model_cache.py keeps


def run_of(variant: str, seed: int = 0) -> MqarRun:
    """The full run of a variant of VARIANTS."""
    if variant not in VARIANTS:
        raise ValueError(f"variant ({variant!r}) must be one of {list(VARIANTS)}")
    return MqarRun(attention=VARIANTS[variant], seed=seed, n_embed=WIDTH, n_head=HEADS)
