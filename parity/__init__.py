"""The parity suite: every trainer, through its xpgym adapter, trains on the same tokens,
computes the same advantages and makes the same updates as the reference, or differs by a
stated formula (docs/parity.md). One package per layer:

- `parity.tokens`, layer 1 (``python -m parity.tokens``): golden episode batches through every
  adapter and the trainer's own advantage code, against `xpgym.training.advantages`;
- `parity.curves`, layer 2 (``python -m parity.curves``): learning curves on CPU inside the
  reference's seed band, and the GPU run of every recipe (``python -m parity.curves.gpu``);
- `parity.update`, layer 3 (``python -m parity.update``): each trainer's own loss, backward
  and optimizer step on the same batch from the same weights;
- `parity.e2e` (``python -m parity.e2e``): each trainer's own training loop end to end on CPU,
  with the harnesses that make it run there (`parity.e2e.verl_cpu`);
- `parity.bench` (``python -m parity.bench``): what one RL step costs in each trainer;
- `parity.shared`: what several of them use (the warm tiny model, curve math, report
  writers, running a trainer's own code here).

`parity` imports `xpgym`, never the reverse.
"""
