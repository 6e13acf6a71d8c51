"""End to end on CPU (``python -m parity.e2e``; docs/parity.md): each trainer's own training
loop through its adapter for a few real optimizer steps from the warm tiny model.

`runs` (the driver: every trainer's run, the checks CI refuses, the table), one module per
trainer whose loop runs here (`trl`, `verl`), and `verl_cpu`, the CPU test harness verl's
run needs (a test harness, not a way to train).
"""
