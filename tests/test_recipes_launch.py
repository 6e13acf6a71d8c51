"""The GPU trainers' recipes, launched for real (no ``--dry-run``) up to their first GPU step.

OpenRLHF, RL2, Oat and ROLL cannot train on a CPU (see docs/trainers.md). Each test here
runs a recipe's ``main()`` with the launch command line a user types, so the trainer's own
parser or validator builds the run's config from the recipe's flags and the trainer's entry
point is called with xpgym's classes. The first step that needs a GPU (or, for ROLL, ROLL
itself) is replaced by a `Recorder` that keeps its arguments and stops the launch; each
test's docstring names it. A renamed flag, a config key the trainer does not know or a
moved import on a launch path fails here.

GPU-only packages the trainers import at module level (vLLM, DeepSpeed, flash-attn, SGLang,
...) get empty stand-ins where missing (`parity.trainers._stand_ins.stand_ins`); nothing
on the launch paths calls them before the stop. A test skips when its trainer is missing.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from parity.trainers._stand_ins import stand_ins

ROOT = Path(__file__).resolve().parent.parent


class LaunchStopError(Exception):
    """Raised by a stopping `Recorder`: the launch got as far as the GPU."""


class Recorder:
    """Stands in for the function `name`: records each call's ``(args, kwargs)``; with
    ``stop`` it then raises `LaunchStopError`, otherwise it returns what ``wraps`` (the real
    function, when given) returns, or None."""

    def __init__(self, name: str, *, stop: bool, wraps: Callable[..., Any] | None = None) -> None:
        self.name, self.stop, self.wraps = name, stop, wraps
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((args, kwargs))
        if self.stop:
            raise LaunchStopError(self.name)
        return None if self.wraps is None else self.wraps(*args, **kwargs)


def load_recipe(name: str, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """``recipes/<name>.py`` as a module (registered for the test only: its dataclasses
    look their module up in ``sys.modules``)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "recipes" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def run_main(
    recipe: types.ModuleType, argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> LaunchStopError:
    """``recipe.main()`` with `argv` as its command line; returns the stop it reached."""
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(LaunchStopError) as stopped:
        recipe.main()
    return stopped.value


@pytest.fixture
def hydra_state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Hydra as a launcher leaves it: run in `tmp_path` (its output dir), errors raised as
    they are, and afterwards its global state cleared and the root logger restored."""
    pytest.importorskip("hydra")
    from hydra.core.global_hydra import GlobalHydra

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    yield
    GlobalHydra.instance().clear()
    root.handlers[:], root.level = handlers, level


# --------------------------------------------------------------------------------------
# OpenRLHF
# --------------------------------------------------------------------------------------

OPENRLHF_GPU_ONLY = [  # imported at module level by openrlhf.cli.train_ppo_ray's imports
    "flash_attn",
    "flash_attn.bert_padding",
    "flash_attn.utils",
    "flash_attn.utils.distributed",
    "deepspeed",
    "deepspeed.runtime",
    "deepspeed.runtime.zero",
    "deepspeed.runtime.zero.partition_parameters",
    "vllm",
    "vllm.inputs",
    "vllm.utils",
]


def test_openrlhf_launch_reaches_the_gpu_placement_group(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Stops at ``ray.util.placement_group.placement_group``, called by OpenRLHF's
    ``train()`` for the colocated actor's GPU bundles.

    Before it: the recipe's ``ray.init`` (recorded, not started) with xpgym's
    ``worker_process_setup_hook``, then ``openrlhf.cli.train_ppo_ray`` run as ``__main__``:
    its argparse parser on the recipe's flags, ``hierarchize``, its argument validation,
    ``train()``'s own ``ray.init`` (recorded) and ``get_strategy`` (a ``DeepspeedStrategy``).
    """
    pytest.importorskip("openrlhf", reason="needs openrlhf 0.11.x (the openrlhf extra)")
    pytest.importorskip("ray")
    import openrlhf.utils
    import ray

    from xpgym.adapters.openrlhf import AGENT_FUNC_PATH

    recipe = load_recipe("train_openrlhf", monkeypatch)
    ray_init = Recorder("ray.init", stop=False)
    get_strategy = Recorder("get_strategy", stop=False, wraps=openrlhf.utils.get_strategy)
    placement_group = Recorder("placement_group", stop=True)
    monkeypatch.setattr(ray, "init", ray_init)
    monkeypatch.setattr(ray, "is_initialized", lambda: bool(ray_init.calls))
    monkeypatch.setattr(openrlhf.utils, "get_strategy", get_strategy)
    placement_groups = importlib.import_module("ray.util.placement_group")  # the module
    monkeypatch.setattr(placement_groups, "placement_group", placement_group)
    argv = ["train_openrlhf.py", "--num-tasks", "4", "--out-dir", str(tmp_path)]
    with stand_ins(OPENRLHF_GPU_ONLY, packages=("openrlhf",)):
        stop = run_main(recipe, argv, monkeypatch)

    assert str(stop) == "placement_group"
    (_, runtime), *_ = ray_init.calls
    assert runtime["runtime_env"]["worker_process_setup_hook"] == (
        "xpgym.adapters.openrlhf.install_turn_rebn"
    )
    (bundles, *_), kwargs = placement_group.calls[0]
    assert bundles == [{"GPU": 1, "CPU": 1}]  # --actor.num_gpus_per_node 1, colocated
    assert kwargs == {"strategy": "PACK"}
    ((args,), _), *_ = get_strategy.calls  # as OpenRLHF's parser and validation left them
    assert args.actor.model_name_or_path == "Qwen/Qwen3-1.7B"
    assert args.train.agent_func_path == AGENT_FUNC_PATH
    assert args.reward.remote_url == ["agent"]
    assert args.critic.model_name_or_path is None  # no critic for reinforce
    assert (args.algo.advantage.estimator, args.algo.advantage.gamma) == ("reinforce", 0.9)
    assert (args.algo.kl.init_coef, args.actor.adam.lr) == (0.0, 1e-6)
    assert list(args.actor.adam.betas) == [0.9, 0.95]
    assert args.actor.eps_clip_low_high == (0.2, 0.2)
    assert args.data.prompt_dataset == str(tmp_path / "train.jsonl")
    rows = (tmp_path / "train.jsonl").read_text().splitlines()
    assert len(rows) == 4
