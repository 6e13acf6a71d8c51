"""The PyTorch reference trainer, the tiny model it trains on CPU, and that model's warm start.

The reference every trainer adapter is held against (``parity/``) and the trainer the CPU
demo (``recipes/train_torch.py``) runs:

* `xpgym.reference.trainer`: `TrainerConfig`, `Trainer` (batch and update) and the loop
  `train`: REINFORCE, ReBN, GRPO, Dr.GRPO, RLOO and PPO with turn-level GAE;
* `xpgym.reference.losses`: per-token log-probs and entropy, PPO-clip, KL estimators, the
  value loss and the loss aggregations (token-mean, seq-mean-token-mean, ...);
* `xpgym.reference.tiny_model`: a word-level tokenizer over an env's text and a small
  Llama-style decoder, built locally (no download);
* `xpgym.reference.warm_start`: language-model pretraining of that model on transcripts of
  random play, so that RL has a signal.

Importing this package imports nothing heavy; `trainer`, `losses` and `warm_start` import
torch, `tiny_model` imports it only when a builder is called.
"""
