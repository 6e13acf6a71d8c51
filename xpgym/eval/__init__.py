"""Evaluation toolkit: ``python -m xpgym eval`` and its library.

Modules, one job each:

* `xpgym.eval.runner`: `EvalConfig`, `Evaluation` (plan, play concurrently, resume), `run_eval`;
* `xpgym.eval.player`: one planned episode -> its record (envs reused through an `EnvPool`);
* `xpgym.eval.records`: the per-episode JSONL records and reading them back;
* `xpgym.eval.models`: model specs (URL, ``vllm:``, local/hub path, ``random``) -> policies;
* `xpgym.eval.policy_adapters`: batching, timing and random policies for the runner;
* `xpgym.eval.multiagent`: one multi-agent episode with a policy per agent;
* `xpgym.eval.metrics`: Pass@k and the summary rows;
* `xpgym.eval.report`: the text table, the PNG plot, versions, the progress bar;
* `xpgym.eval.secrets`: masking the API key in errors and logs.

Importing this package imports nothing beyond xpgym's core (numpy); torch, transformers,
vllm, matplotlib and tqdm are imported when used. ``docs/eval.md`` is the user guide.
"""

from __future__ import annotations

from xpgym.eval.metrics import SummaryRow, pass_at_k, summarize
from xpgym.eval.runner import EvalConfig, EvalSummary, Evaluation, run_eval

__all__ = [
    "EvalConfig",
    "EvalSummary",
    "Evaluation",
    "SummaryRow",
    "pass_at_k",
    "run_eval",
    "summarize",
]
