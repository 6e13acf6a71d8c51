"""Layer 3 of the parity suite: each trainer's own update code on the same batch.

The runners follow the contract of `parity.update.job`.
"""
