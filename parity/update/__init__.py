"""Layer 3 of the parity suite: each trainer's own update code on the same batch (filled in by `parity.update.job` runners)."""
