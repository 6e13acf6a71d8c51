"""What several parity layers use, one home each:

- `warm_model`: the warm tiny model every layer starts from (config, pretraining, cache);
- `curves`: learning-curve math (a curve from an episode log, smoothing, the band);
- `reports`: where results go and how (the JSON report, JSON files, markdown tables, the
  generated blocks of the docs, PNG figures);
- `trainer_code`: running a trainer's own code here (its version, stand-ins for GPU-only
  modules, `NotRunnableError`);
- `environment`: environment variables set for a block.
"""
