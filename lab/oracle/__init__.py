"""The reference the guide's layers are checked against: transformers' layers and models
with the same weights, tiny random models of every family, and the families' published
sizes."""
