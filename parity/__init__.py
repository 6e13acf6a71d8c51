"""Cross-trainer parity suite: golden episode batches (`parity.cases`), the advantage and
layout check of every trainer adapter (`python -m parity.check`), and learning curves on a
tiny model (`python -m parity.curves`). See docs/parity.md."""
