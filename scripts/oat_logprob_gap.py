"""Where Oat's ``logprobs_diff_max`` of up to 2.4 on xpgym's per-turn rows comes from.

Samples episodes with the warm tiny model (`parity.shared.warm_model.warm_model_dir`), converts
them with `xpgym.adapters.oat.to_transition_data` and runs Oat's own ``PPOLearner.learning_step``
(`parity.update.oat.learning_steps`) twice on the same rows:

* ``accumulate``: DeepSpeed's gradient accumulation, one optimizer step per
  ``learning_step`` (what Oat does);
* ``per-micro-batch``: an optimizer step after every micro-batch (a stand-in without
  accumulation).

It also scores every row with the model directly (``max |sampler - learner|`` log-prob over
the response tokens, Oat's next-token positions). Prints one line per step and writes JSON.

Usage::

    .venv/bin/python scripts/oat_logprob_gap.py --steps 3 --out oat_logprob_gap.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any


def _episodes(model_dir: Path, count: int, seed: int) -> list[Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import xpgym
    from xpgym.rollout.collector import RolloutCollector
    from xpgym.rollout.policies.hf import HFPolicy

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    vec = xpgym.make_vec("game:GuessTheNumber-v0-easy", 4)
    try:
        policy = HFPolicy(model, tokenizer, max_new_tokens=6, seed=seed)
        return RolloutCollector(vec, policy).collect(count, seed=seed)
    finally:
        vec.close()


def _direct_gap(model_dir: Path, episodes: list[Any]) -> float:
    """Largest |sampler - model| log-prob over all policy tokens, one turn at a time."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    gap = 0.0
    with torch.no_grad():
        for turn in (turn for episode in episodes for turn in episode.turns):
            ids = torch.tensor([turn.prompt_ids + turn.response_ids])
            logps = model(ids).logits[0, :-1].log_softmax(-1).gather(-1, ids[0, 1:, None])[:, 0]
            own = logps[len(turn.prompt_ids) - 1 :]
            gap = max(gap, float((own - torch.tensor(turn.response_logprobs)).abs().max()))
    return gap


def main(argv: list[str] | None = None) -> int:
    import torch

    from parity.shared.warm_model import WarmModelConfig, warm_model_dir
    from parity.update.job import UpdateHParams, UpdateJob
    from parity.update.oat import learning_steps

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--lr", type=float, default=UpdateHParams().lr)
    parser.add_argument("--micro-batch-size", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("oat_logprob_gap.json"))
    args = parser.parse_args(argv)

    torch.set_num_threads(1)
    print("warm model (built once per machine) ...", flush=True)
    model_dir = warm_model_dir(WarmModelConfig())
    episodes = _episodes(model_dir, args.episodes, args.seed)
    hparams = UpdateHParams(lr=args.lr, micro_batch_size=args.micro_batch_size)
    job = UpdateJob(model_dir=model_dir, episodes=episodes, steps=args.steps, hparams=hparams)
    report: dict[str, Any] = {
        "hparams": dataclasses.asdict(hparams),
        "rows": sum(len(episode.turns) for episode in episodes),
        "direct_max_logprob_gap": _direct_gap(model_dir, episodes),
    }
    print(
        f"{report['rows']} rows; direct max |sampler - learner| log-prob: "
        f"{report['direct_max_logprob_gap']:.3g}"
    )
    for name, accumulate in (("accumulate", True), ("per-micro-batch", False)):
        run, metrics = learning_steps(job, accumulate=accumulate)
        report[name] = [
            {"loss": s.loss, "grad_norm": s.grad_norm, **m}
            for s, m in zip(run.steps, metrics, strict=True)
        ]
        for k, row in enumerate(report[name], 1):
            print(
                f"{name:16s} step {k}: logprobs_diff max {row['logprobs_diff_max']:.3g} "
                f"min {row['logprobs_diff_min']:.3g}; sampler-learner prob diff "
                f"[{row['sampler_learner_prob_diff_min']:.3g}, "
                f"{row['sampler_learner_prob_diff_max']:.3g}]; kl_sample_train_v1 "
                f"{row['kl_sample_train_v1']:.3g}"
            )
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
