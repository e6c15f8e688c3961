"""Pieces of one page's command, split out by job: the attention-cost page's runs, tables
and rendered results, the beyond-softmax recall experiment, and the pieces today's cost
measures."""
