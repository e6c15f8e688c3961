# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # See attention
#
# The [attention page](../attention/) built attention from its equation; this page
# trains two small models and draws where their heads look. It is a notebook, run
# from top to bottom every time the site is built with code that changed: each
# number and picture below comes from that run, on one CPU core.
#
# 1. A two-layer model made of attention alone, trained on sequences that repeat:
#    one of its heads becomes an **induction head**, a head that finds the earlier
#    copy of the current token and looks at what came next.
# 2. [The guide's GPT](../transformer/), trained briefly on the text of the guide
#    itself, one token per character: each head's attention pattern on a sentence,
#    with the causal mask visible as the empty upper triangle.
#
# **Afterwards you can** tell an induction head and a previous-token head apart on a
# heat map, and read a head's pattern off its weights.
# **About <!-- minutes --> minutes.**
#
# The models live in `snippets/pages/induction.py` and
# `snippets/pages/char_gpt.py`. The
# [attention explorer](../multi-head/#see-the-heads-at-work) shows the same models'
# weights, one query at a time. API reference:
# [snippets.pages.induction](../reference/pages/induction/),
# [snippets.pages.char_gpt](../reference/pages/char_gpt/).

# %%
import torch
from IPython.display import HTML, display

from lab.model_cache import trained_char_gpt, trained_induction
from lab.see_attention import heatmap, letters, mask_image
from lab.shared.style import inline_svg, legible_font_size, pyplot
from snippets.core.masks import attention_mask
from snippets.pages.char_gpt import CharGPTConfig, gpt_attention
from snippets.pages.induction import (
    AttentionOnly,
    InductionConfig,
    induction_scores,
    previous_token_scores,
    repeated_tokens,
    uniform_induction_score,
)

# One thread: the models are small, and the build runs next to other work.
torch.set_num_threads(1)

# %% [markdown]
# The figures are drawn in the site's one plotting style: SVG with a transparent
# background, text and axes in a grey that reads on the light and on the dark
# scheme alike, put inside the page. Each is 5 inches wide, with
# its text large enough to stay readable when a phone shrinks it to its screen.

# %%
plt = pyplot()  # matplotlib in the site's style
WIDTH = 5  # inches: every figure below
plt.rcParams["font.size"] = legible_font_size(WIDTH)


def show(fig, description: str) -> None:
    """Display fig as an SVG inside the page; description: for screen readers."""
    display(HTML(inline_svg(fig, description)))


# %% [markdown]
# ## An induction head
#
# Text repeats itself: names, phrases, lines of code. A model that has seen "... q k
# ..." can guess that the next "q" will again be followed by "k". An induction head
# does this with attention: at the second "q" it attends to the "k" after the first
# one, and copies it forward. It needs two layers, one to note at each position
# which token came before it, one to search for the position whose predecessor is
# the current token.
#
# The task makes that the only way to win. Every row is a segment of distinct random
# tokens (shown as letters) repeated until the row is full; the segment's length,
# its period, changes from row to row, so no head can find the earlier copy by its
# position alone:

# %%
config = InductionConfig()
rows = repeated_tokens(
    4,
    config.context_length,
    config.vocab_size,
    config.min_period,
    config.max_period,
    generator=torch.Generator().manual_seed(1),
)
for row in rows:
    print("".join(letters(row)))

# %% [markdown]
# The first copy of a segment is unpredictable; everything after it can be predicted
# exactly, by copying. The model is `AttentionOnly`: token and position embeddings,
# two layers of the guide's `CausalSelfAttention`, four heads each, and no MLP.
# `trained_induction` trains it, or loads the copy that this same code already
# trained, so the page and the attention explorer show the same model.

# %%
model, losses = trained_induction(config)
print(config)
print(
    f"loss over steps 1-20: {sum(losses[:20]) / 20:.2f}, "
    f"over the last 20: {sum(losses[-20:]) / 20:.2f}"
)

# %% [markdown]
# The loss settles near the cost of the unpredictable first copies; the loss on the
# repeated part alone is measured on held-out rows below.

# %%
fig, ax = plt.subplots(figsize=(WIDTH, 2.4))
ax.plot(range(1, len(losses) + 1), losses, linewidth=1)
ax.set_xlabel("training step")
ax.set_ylabel("loss (nats)")
ax.set_ylim(bottom=0)
ax.spines[["top", "right"]].set_visible(False)
show(
    fig,
    "Training loss of the attention-only model: it falls from "
    f"{sum(losses[:20]) / 20:.1f} over the first 20 steps to "
    f"{sum(losses[-20:]) / 20:.1f} over the last 20.",
)

# %% [markdown]
# ### Scoring the heads
#
# To find the induction head, score each head on rows made of one segment of
# $S = 16$ tokens, repeated once. A token at position $t \ge S$ last occurred
# at $t - S$, and the token after that occurrence sits at $t - S + 1$. A
# head's **induction score** is its mean attention weight on exactly that key, over
# all queries of the second copy; its **previous-token score** is its mean weight on
# key $t - 1$:
#
# $$
# \text{induction} = \frac{1}{T - S} \sum_{t=S}^{T-1} a_{t,\,t-S+1},
# \qquad
# \text{previous token} = \frac{1}{T - 1} \sum_{t=1}^{T-1} a_{t,\,t-1}.
# $$
#
# A head that spreads its attention evenly gives $1/(t+1)$ to each of the $t+1$
# keys it may see. Averaged over the second copy that is the **uniform baseline**,
# computed below; an untrained model is close to it.

# %%
S = 16  # the segment length
T = config.context_length
held_out = repeated_tokens(
    256, T, config.vocab_size, S, generator=torch.Generator().manual_seed(123)
)
with torch.no_grad():
    logits, weights = model(held_out)  # weights: (B, L, H, T, T)
    torch.manual_seed(1)
    _, untrained_weights = AttentionOnly(config)(held_out)
second_copy = torch.nn.functional.cross_entropy(
    logits[:, S:-1].flatten(0, 1), held_out[:, S + 1 :].flatten()
)
print(f"loss on the second copy: {second_copy:.3f} nats per token")
induction = induction_scores(weights, S)  # (L, H)
previous = previous_token_scores(weights)
untrained = induction_scores(untrained_weights, S)
baseline = uniform_induction_score(S, T)
print(f"uniform baseline: {baseline:.3f}")
print(f"untrained model, best head: {untrained.max():.3f}")
print("layer head  induction  previous token")
for layer in range(config.n_layer):
    for head in range(config.n_head):
        print(
            f"{layer + 1:>5} {head + 1:>4}  {induction[layer, head]:9.3f}"
            f"  {previous[layer, head]:14.3f}"
        )
strong = int((induction[-1] >= 10 * baseline).sum())
print(f"second-layer heads at least 10x the baseline: {strong} of {config.n_head}")
most = int((induction[-1] > 0.5).sum())
print(f"second-layer heads with over half their weight on that key: {most}")
best = int(previous[0].argmax())
print(
    f"first layer, most weight on the token before: H{best + 1}, "
    f"{previous[0, best]:.2f} (all heads: {previous[0].min():.2f} to "
    f"{previous[0].max():.2f})"
)

# %% [markdown]
# The last lines say how this run's heads split. An induction head puts its weight
# on one key, the token that followed the earlier copy of the current one; the
# first count is the second-layer heads at least ten times above the uniform
# baseline there, the second those giving it more than half their weight. A
# previous-token head in the first layer is the other half of the circuit (Olsson
# et al., 2022): it writes into each position what token came before, which is what
# a second-layer head's query must match. Here is every head on one held-out row,
# query down the side, key along the top:

# %%
fig, axes = plt.subplots(config.n_layer, config.n_head, figsize=(WIDTH, 4.2))
for layer in range(config.n_layer):
    for head in range(config.n_head):
        title = (
            f"L{layer + 1} H{head + 1}\n"
            f"ind {induction[layer, head]:.2f}\nprev {previous[layer, head]:.2f}"
        )
        heatmap(axes[layer, head], weights[0, layer, head], None, title)
fig.tight_layout()
show(
    fig,
    "The 8 heads of the attention-only model on a repeated row, with their scores. "
    "Second-layer heads show a stripe 15 positions below the main diagonal.",
)

# %% [markdown]
# The two heads of the circuit, up close: the best induction head, and the best
# previous-token head of the first layer, with the row's letters along the axes.

# %%
tokens = letters(held_out[0])
best = divmod(int(induction.argmax()), config.n_head)
best_previous = (0, int(previous[0].argmax()))
descriptions = {
    "induction": f"Head L{best[0] + 1} H{best[1] + 1} attends 15 keys back "
    "in the second copy.",
    "previous-token": f"Head L1 H{best_previous[1] + 1} attends mostly "
    "to the previous token.",
}
for (layer, head), kind in zip([best, best_previous], descriptions, strict=True):
    # One head per figure, its cells taller than wide: a letter for every row.
    fig, ax = plt.subplots(figsize=(WIDTH, 6.2))
    title = f"L{layer + 1} H{head + 1}: the best {kind} head"
    heatmap(ax, weights[0, layer, head], tokens, title, aspect="auto")
    ax.set_ylabel("query")
    ax.set_xlabel("key")
    fig.tight_layout()
    show(fig, descriptions[kind])

# %% [markdown]
# Read a second-layer head row by row. A query in the second copy (the lower half)
# puts its weight on one key in the first copy, 15 positions back: the stripe
# parallel to the diagonal. That key holds the token that followed the query's
# earlier occurrence, which is exactly the token to predict. In the first layer the
# weight hugs the diagonal: those heads look at the token just before.
#
# Is it the causal mask that forces this solution? Without it, a model could read
# the answer at $t + 1$ directly. Trained without the mask, or with heads that
# attend uniformly, the same model forms no induction head.
#
# ## The guide's GPT on its own text
#
# Now the full model of the [transformer page](../transformer/), two blocks of four
# heads, trained briefly (the `steps` printed below) on the guide's own pages, one
# token per character. That is far too short to learn English, long enough for its
# heads to differ:

# %%
gpt, char, gpt_losses = trained_char_gpt(CharGPTConfig())
print(CharGPTConfig())
print(
    f"loss over steps 1-20: {sum(gpt_losses[:20]) / 20:.2f}, "
    f"over the last 20: {sum(gpt_losses[-20:]) / 20:.2f}"
)

# %% [markdown]
# `gpt_attention` runs the model and, with a hook on each attention layer, collects
# the weights of every head. Each panel is one head; row $t$ is what the character
# at $t$ attends to. The upper triangle is empty: that is the causal mask, no
# character sees the ones after it. The head that most reads the character before
# comes after them, up close, with the sentence along its axes.

# %%
sentence = "The causal mask hides the future"
idx = torch.tensor([char.encode(sentence)])  # (1, T)
gpt_weights = gpt_attention(gpt, idx)[0]  # (L, H, T, T)
gpt_previous = previous_token_scores(gpt_weights[None])  # (L, H)
print("attention weights:", tuple(gpt_weights.shape), "(L, H, T, T)")
print("above the diagonal:", gpt_weights.triu(diagonal=1).abs().max().item())
shown_chars = [c if c != " " else "␣" for c in sentence]
# How often each head's strongest key is the query itself, the character before
# it, a space, or the first character of the sentence.
T = len(sentence)
strongest = gpt_weights.argmax(dim=-1)  # (L, H, T): each query's strongest key
is_space = torch.tensor([c == " " for c in sentence])
kinds = {
    "itself": strongest == torch.arange(T),
    "previous": strongest == torch.arange(T) - 1,
    "a space": is_space[strongest],
    "first": strongest == 0,
}
print("head " + "".join(f"{kind:>9}" for kind in kinds))
for layer in range(2):
    for head in range(4):
        shares = "".join(
            f"{k[layer, head].float().mean():9.2f}" for k in kinds.values()
        )
        print(f"L{layer + 1} H{head + 1}" + shares)
for kind, k in kinds.items():
    share = k.float().mean(dim=-1)  # (L, H): the share of queries of each head
    layer, head = divmod(int(share.argmax()), 4)
    print(
        f"most often {kind!r}: L{layer + 1} H{head + 1}, {share[layer, head]:.2f}"
    )
fig, axes = plt.subplots(2, 4, figsize=(WIDTH, 3.6))
for layer in range(2):
    for head in range(4):
        title = f"L{layer + 1} H{head + 1}\nprev {gpt_previous[layer, head]:.2f}"
        heatmap(axes[layer, head], gpt_weights[layer, head], None, title)
fig.tight_layout()
show(
    fig,
    "Attention of the 8 heads of the character-level GPT on the sentence "
    f"'{sentence}', with their previous-token scores. "
    "The upper triangles are empty.",
)
layer, head = divmod(int(gpt_previous.argmax()), 4)
fig, ax = plt.subplots(figsize=(WIDTH, 6.2))
title = f"L{layer + 1} H{head + 1}: previous token {gpt_previous[layer, head]:.2f}"
heatmap(ax, gpt_weights[layer, head], shown_chars, title, aspect="auto")
ax.set_ylabel("query")
ax.set_xlabel("key")
fig.tight_layout()
show(
    fig,
    f"Head L{layer + 1} H{head + 1} of the character-level GPT on '{sentence}', "
    "one character per row and column.",
)

# %% [markdown]
# Read the table with the pictures; the last lines name, for each kind of key, the
# head that picks it most often in this run. A head that reads the previous
# character hands each position the two last characters, so the next one can be
# predicted from a trigram's context; a bigram needs no attention at all, since the
# current character is already there. A second-layer head reads positions that have
# already gathered from their own neighbours. The
# [attention explorer](../multi-head/#see-the-heads-at-work) lets you walk through
# them one query at a time, on this sentence and others.
#
# ## Causal and padding masks together
#
# Rows of different lengths are padded to one length. When the padding goes on the
# left, as in batched generation, the causal mask alone would let every real token
# attend to the padding before it; a padding mask blocks those keys. A padding query
# then has no key left at all, a row of $-\infty$ that softmax turns into NaN, so
# it keeps its own position. `attention_mask` combines the two:

# %%
labels = ["<pad>", "<pad>", "the", "cat", "sat"]
both = attention_mask(torch.tensor([3]), len(labels))[0]  # (T, T)
print(both.int())
fig, axes = plt.subplots(1, 3, figsize=(WIDTH, 3.0))
panels = {
    "causal": torch.ones(5, 5).tril().bool(),
    "padding": both.new_tensor([[False, False, True, True, True]] * 5),
    "both, with the\ndiagonal kept": both,
}
for n, (ax, (title, mask)) in enumerate(zip(axes, panels.items(), strict=True)):
    mask_image(ax, mask, labels, title, row_labels=n == 0)  # allowed: filled
    ax.set_xlabel("key")
axes[0].set_ylabel("query")
fig.tight_layout()
show(
    fig,
    "Three 5 by 5 masks: causal (lower triangle), padding (the first two key "
    "columns blocked), and both combined with the diagonal kept.",
)

# %% [markdown]
# The same combination, with scores, is worked through in [Generation in
# depth](../generation-in-depth/#padding-a-batch-causal-and-padding-masks-together).
#
# ## Next
#
# These models were trained briefly, with a plain loop. [Training a small
# GPT](../optimization/) builds the loop properly: AdamW, warmup and a cosine
# schedule, clipping, and a run that reaches the best possible loss.
#
# ## Further reading
#
# - Olsson, Elhage, Nanda, Joseph, et al. (2022), *In-context Learning and Induction
#   Heads*, [arXiv:2209.11895](https://arxiv.org/abs/2209.11895): induction heads,
#   the previous-token heads they rely on, and how they form during training.
# - Clark, Khandelwal, Levy, Manning (2019), *What Does BERT Look At? An Analysis of
#   BERT's Attention*, [arXiv:1906.04341](https://arxiv.org/abs/1906.04341): heads
#   that attend to the previous token, to delimiters and to syntactic relations.
