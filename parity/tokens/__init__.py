"""Layer 1: same tokens, same advantages (``python -m parity.tokens``; docs/parity.md).

`cases` (the golden batches in ``golden/``, written by `make_golden`), `core` (what a trainer
module provides, the reference, the classification), one module per trainer exposing
``SPEC`` (`verl`, `openrlhf`, `rl2`, `oat`, `roll`, `trl`; with `_formulas` and `_layout`),
and `check`, which runs them all.
"""
