"""Models trained for more than one page, or kept trained in the model cache: the MQAR
recipe, the copy task, the Bigram-Backcopy sink models, the kv-heads page's MQAR models and
the See-attention GPT for the browser."""
