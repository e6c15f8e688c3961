"""Runnable, tested code shown on the guide's pages: torch and the standard library.

Four layers, each importing only those above it in this list:

    core/     what every model is made of: checks, masks (and which keys a
              layer sees), positions and RoPE scaling, the plain causal layer
              and its spec (attention), the cache, the block's pieces, the
              GPT (model), the loss; spec holds LayerSpec, the one way a block
              gets its layer (spec.build())
    layers/   one file per kind of attention a GPT's block can hold, each a
              LayerSpec and its layer: configurable softmax (GQA, windows,
              the taming pieces, Gemma 4), taming, MLA, DSA, compressed,
              differential, the linear family (linear_layers and the rules)
    run/      what runs a model: data, tokenizer, train, checkpoint, generate,
              streaming, throughput
    pages/    what a page uses beside a model: exercises and grading, tasks,
              measurement, the small trained models, cross-attention

lessons/ holds the foundation pages' plain-torch lessons, each importing only
earlier lessons (and the training lesson the batches of run/data); tests prove
each equal to the library's code.
"""
