r"""Rollout speed of the CPU demo, with and without `HFPolicy`'s cross-turn KV cache.

    python scripts/bench_rollout.py [--steps 8] [--warmup-steps 1] [--pretrain-steps 40]
                                    [--threads 0] [--no-gc-freeze]
                                    [--out results/bench_rollout.json]

Builds the demo of ``recipes/train_torch.py`` with its defaults (the same tokenizer, model,
64 episodes per step, vector env and trainer), pretrains it for `--pretrain-steps` steps so
that replies look like the demo's (``\boxed{n}`` then the stop token, episodes ending at
different turns), then, from the same weights, runs `--steps` RL steps (collect 64 episodes
+ one update) with the cache and without it, alternating step by step, after
`--warmup-steps` uncounted ones (the first use of a chat template's forms, the prefix
consistency check, torch's first calls: costs paid once per run). Like the demo, it
first freezes what was built out of the garbage collector's reach
(``freeze_what_was_built``; `--no-gc-freeze` skips it). For each mode it reports:

* wall time per RL step, split into rollout (``collector.collect``) and update;
* policy throughput: generated tokens per second of ``policy.generate``, and prompt tokens
  prefilled (all of every prompt without the cache, only the new ones with it);
* where a rollout's time goes: the model (the decoding loop or ``model.generate``),
  cache matching (finding the cached row each prompt continues, inside the cached decoding
  call), conversion (the rest of ``policy.generate``: encoding, seeding, building
  `Generation`s), env (every call on the vector env), prompt building
  (`ChatPromptBuilder`), and the collector's own bookkeeping (the rest). "Overhead" is
  all but the model as a share of rollout time, in wall time
  and in the main thread's CPU time (a busy machine's other jobs stretch the wall time of
  whatever part is running when they take the core; the CPU time shares do not move with
  them, but they miss work a library hands to its own threads while the main thread
  waits, e.g. a Hugging Face tokenizer's batched encode spread over the cores: compare
  such changes by their wall shares on a quiet machine).

Writes the numbers as JSON to `--out` and prints a table. Timings come from wrapping those
methods on the instances (``time.perf_counter`` and ``time.thread_time``), so the collector
and policy run unchanged.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from xpgym.recipe_args import parse_dataclass_args
from xpgym.rollout.collector import RolloutCollector

ROOT = Path(__file__).resolve().parent.parent
ENV_METHODS = ("reset", "step", "get_states", "set_states", "get_attr", "call")


@dataclasses.dataclass
class Options:
    steps: int = 8  # RL steps per mode
    warmup_steps: int = 1  # RL steps per mode played first and not counted (first-use costs)
    pretrain_steps: int = 40
    threads: int = 0  # torch threads; 0: the demo's choice (idle cores)
    no_gc_freeze: bool = False  # skip freezing what was built before the RL steps (the demo does)
    out: str = "results/bench_rollout.json"


def load_recipe() -> Any:
    """``recipes/train_torch.py`` as a module (its `Args`, `build`, `make_policy`)."""
    spec = importlib.util.spec_from_file_location(
        "train_torch", ROOT / "recipes" / "train_torch.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while defining
    spec.loader.exec_module(module)
    return module


class Clock:
    """Seconds spent in wrapped methods, per key: wall time (`seconds`) and the calling
    thread's CPU time (`cpu_seconds`, which time on a busy machine's other jobs does not
    inflate; with one torch thread the model's work runs on the calling thread too)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu_seconds: dict[str, float] = defaultdict(float)

    def wrap(self, obj: Any, name: str, key: str) -> None:
        """Replace ``obj.name`` on the instance by a timed call of the original."""
        original: Callable[..., Any] = getattr(obj, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start, cpu_start = time.perf_counter(), time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[key] += time.perf_counter() - start
                self.cpu_seconds[key] += time.thread_time() - cpu_start

        setattr(obj, name, timed)


class Mode:
    """The demo with or without the cache, from `weights`, timed (module docstring)."""

    def __init__(self, recipe: Any, args: Any, weights: dict[str, Any]) -> None:
        self.args = args
        tokenizer, model, self.vec, self.trainer = recipe.build(args)
        model.load_state_dict(weights)
        self.policy = recipe.make_policy(model, tokenizer, args, args.temperature)
        self.collector = RolloutCollector(self.vec, self.policy)
        self.clock = Clock()
        self.clock.wrap(self.policy, "generate", "generate")
        decoder = self.policy._decoder
        self.clock.wrap(
            decoder or self.policy, "decode" if decoder else "_generate_uncached", "model"
        )
        if decoder:  # xpgym's own work inside the decoding call: not the model's
            self.clock.wrap(decoder, "_match", "cache matching")
        # `extend` calls `extend_many` (the collector calls it directly): wrapped once
        self.clock.wrap(self.collector.prompt_builder, "start", "prompt building")
        self.clock.wrap(self.collector.prompt_builder, "extend_many", "prompt building")
        for name in ENV_METHODS:
            self.clock.wrap(self.vec, name, "env")
        self.played = 0  # RL steps played, warm-up included (each step's seed)
        self.start_counting()

    def start_counting(self) -> None:
        """Forget the steps so far: what they cost is not reported."""
        self.clock.seconds.clear()
        self.clock.cpu_seconds.clear()
        self.steps = 0
        self.rollout_s = self.update_s = self.rollout_cpu_s = 0.0
        self.generated = self.prompt_tokens = 0

    def step(self) -> float:
        """One RL step (collect + update); returns the rollout's seconds."""
        self.steps += 1
        self.played += 1
        seed = self.args.seed * 100_003 + self.played
        start, cpu_start = time.perf_counter(), time.thread_time()
        episodes = self.collector.collect(self.args.episodes_per_step, seed=seed)
        middle = time.perf_counter()
        self.rollout_cpu_s += time.thread_time() - cpu_start
        self.trainer.train_step(episodes)
        self.rollout_s += middle - start
        self.update_s += time.perf_counter() - middle
        turns = [turn for episode in episodes for turn in episode.turns]
        self.generated += sum(len(turn.response_ids) for turn in turns)
        self.prompt_tokens += sum(len(turn.prompt_ids) for turn in turns)
        return middle - start

    def report(self) -> dict[str, Any]:
        self.vec.close()
        parts = _parts(self.clock.seconds, self.rollout_s)
        cpu_parts = _parts(self.clock.cpu_seconds, self.rollout_cpu_s)
        seconds = self.clock.seconds
        stats = self.policy.cache_stats
        prefilled = stats.prefilled if stats else self.prompt_tokens
        return {
            "kv_cache": self.policy.kv_cache,
            "steps": self.steps,
            "step_s": (self.rollout_s + self.update_s) / self.steps,
            "rollout_s": self.rollout_s / self.steps,
            "update_s": self.update_s / self.steps,
            "generated_tokens_per_s": self.generated / seconds["generate"],
            "prompt_tokens_prefilled_per_step": prefilled / self.steps,
            "rollout_share": {k: v / self.rollout_s for k, v in parts.items()},
            "overhead_share": 1 - parts["model"] / self.rollout_s,
            "rollout_cpu_share": {k: v / self.rollout_cpu_s for k, v in cpu_parts.items()},
            "overhead_cpu_share": 1 - cpu_parts["model"] / self.rollout_cpu_s,
        }


def _parts(seconds: dict[str, float], rollout_s: float) -> dict[str, float]:
    """Where a rollout's `rollout_s` went, from the clock's per-key `seconds`."""
    matching = seconds.get("cache matching", 0.0)
    parts = {
        "model": seconds["model"] - matching,
        "cache matching": matching,
        "conversion": seconds["generate"] - seconds["model"],
        "env": seconds.get("env", 0.0),
        "prompt building": seconds.get("prompt building", 0.0),
    }
    parts["bookkeeping"] = rollout_s - sum(parts.values())
    return parts


def main() -> None:
    options = parse_dataclass_args(Options, __doc__.splitlines()[0])
    recipe = load_recipe()
    args = recipe.Args()
    torch.set_num_threads(options.threads or recipe.idle_cores())
    tokenizer, model, vec, _ = recipe.build(args)
    print(f"pretraining {options.pretrain_steps} steps ...", flush=True)
    recipe.warm_start(
        model, tokenizer, vec, dataclasses.replace(args, pretrain_steps=options.pretrain_steps)
    )
    vec.close()
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    # The two modes alternate step by step, so that both see the same machine load.
    modes = {
        name: Mode(recipe, dataclasses.replace(args, no_kv_cache=name == "uncached"), weights)
        for name in ("cached", "uncached")
    }
    if not options.no_gc_freeze:
        recipe.freeze_what_was_built()
    for step in range(1, options.warmup_steps + 1):
        times = {name: mode.step() for name, mode in modes.items()}
        print(f"  warm-up step {step}/{options.warmup_steps}: rollout s {times}", flush=True)
    for mode in modes.values():
        mode.start_counting()
    for step in range(1, options.steps + 1):
        times = {name: mode.step() for name, mode in modes.items()}
        print(f"  RL step {step}/{options.steps}: rollout s {times}", flush=True)
    results = {name: mode.report() for name, mode in modes.items()}
    cached, uncached = results["cached"], results["uncached"]
    summary = {
        "options": dataclasses.asdict(options),
        "torch_threads": torch.get_num_threads(),
        **results,
        "speedup": {
            "rollout": uncached["rollout_s"] / cached["rollout_s"],
            "rl_step": uncached["step_s"] / cached["step_s"],
            "generated_tokens_per_s": cached["generated_tokens_per_s"]
            / uncached["generated_tokens_per_s"],
        },
    }
    out = Path(options.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")

    print(f"\n{'':<34}{'cached':>10}{'uncached':>10}{'speedup':>9}")
    for key, label in (
        ("step_s", "RL step, s"),
        ("rollout_s", "rollout, s"),
        ("update_s", "update, s"),
        ("generated_tokens_per_s", "generated tokens/s"),
        ("prompt_tokens_prefilled_per_step", "prompt tokens prefilled/step"),
    ):
        a, b = cached[key], uncached[key]
        speedup = a / b if key == "generated_tokens_per_s" else b / a
        print(f"{label:<34}{a:>10.2f}{b:>10.2f}{speedup:>9.2f}")
    for clock, suffix in (("", "wall"), ("_cpu", "CPU")):
        shares = f"rollout{clock}_share"
        for part in cached[shares]:
            a, b = cached[shares][part], uncached[shares][part]
            print(f"{f'{suffix} share: {part}':<34}{a:>10.1%}{b:>10.1%}")
        a, b = cached[f"overhead{clock}_share"], uncached[f"overhead{clock}_share"]
        print(f"{f'{suffix} overhead (all but the model)':<34}{a:>10.1%}{b:>10.1%}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
