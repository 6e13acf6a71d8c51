"""The GPU trainers' recipes, launched for real (no ``--dry-run``) up to their first GPU step.

OpenRLHF, RL2, Oat and ROLL cannot train on a CPU (see docs/trainers.md). Each test here
runs a recipe's ``main()`` with the launch command line a user types, so the trainer's own
parser or validator builds the run's config from the recipe's flags and the trainer's entry
point is called with xpgym's classes. The first step that needs a GPU (or, for ROLL, ROLL
itself) is replaced by a `Recorder` that keeps its arguments and stops the launch; each
test's docstring names it. A renamed flag, a config key the trainer does not know or a
moved import on a launch path fails here.

GPU-only packages the trainers import at module level (vLLM, DeepSpeed, flash-attn, SGLang,
...) get empty stand-ins where missing (`parity.shared.trainer_code.stand_ins`); nothing
on the launch paths calls them before the stop. A test skips when its trainer is missing.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from parity.shared.rl2_imports import STAND_INS as RL2_GPU_ONLY  # RL2.trainer.ppo imports them
from parity.shared.trainer_code import stand_ins
from parity.tokens.openrlhf import GPU_ONLY as OPENRLHF_GPU_ONLY  # its CLI's imports too

ROOT = Path(__file__).resolve().parents[2]


class LaunchStopError(Exception):
    """Raised by a stopping `Recorder`: the launch got as far as the GPU."""


class Recorder:
    """Stands in for the function `name`: records each call's ``(args, kwargs)``; with
    ``stop`` it then raises `LaunchStopError`, otherwise it returns what ``wraps`` (the real
    function, when given) returns, or None."""

    def __init__(self, name: str, *, stop: bool, wraps: Callable[..., Any] | None = None) -> None:
        self.name, self.stop, self.wraps = name, stop, wraps
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self.returned: list[Any] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((args, kwargs))
        if self.stop:
            raise LaunchStopError(self.name)
        self.returned.append(None if self.wraps is None else self.wraps(*args, **kwargs))
        return self.returned[-1]


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
    """Runs the test in `tmp_path` and clears the global Hydra state a launcher's
    ``initialize()`` leaves behind."""
    pytest.importorskip("hydra")
    from hydra.core.global_hydra import GlobalHydra

    monkeypatch.chdir(tmp_path)
    yield
    GlobalHydra.instance().clear()


# --------------------------------------------------------------------------------------
# OpenRLHF
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# RL2
# --------------------------------------------------------------------------------------


def test_rl2_launch_reaches_the_nccl_process_group(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Stops at RL2's ``PPOTrainer(config)`` (it builds the actor on a CUDA mesh), after
    ``initialize_global_process_group`` (``nccl``), which is recorded, not run.

    Before it: the recipe's launch writes the dataset and hands ``torchrun`` its command
    (``os.execvp``, recorded); the test then runs that command's script part the way
    torchrun would: ``--rl2-worker`` imports ``RL2.trainer.ppo``, installs xpgym's advantage
    override, composes RL2's ``ppo`` config with Hydra from the overrides on the command
    line and calls RL2's ``main(config)``.
    """
    pytest.importorskip("RL2", reason="needs rl-square 0.0.2 (the rl2 extra)")
    import transformers.modeling_flash_attention_utils as flash_utils

    recipe = load_recipe("train_rl2", monkeypatch)
    execvp = Recorder("os.execvp", stop=True)
    monkeypatch.setattr(recipe.os, "execvp", execvp)
    argv = ["train_rl2.py", "--num-tasks", "4", "--out-dir", str(tmp_path)]
    assert str(run_main(recipe, argv, monkeypatch)) == "os.execvp"
    ((program, command), _), *_ = execvp.calls
    assert program == "torchrun"
    assert shutil.which("torchrun")
    assert command[1:4] == [
        "--nproc_per_node=1",
        str(ROOT / "recipes/train_rl2.py"),
        "--rl2-worker",
    ]
    assert len((tmp_path / "train.jsonl").read_text().splitlines()) == 4

    # rl-square 0.0.2 imports this flash-attn helper that transformers 5 removed (GPU only).
    monkeypatch.setattr(
        flash_utils, "is_flash_attn_greater_or_equal_2_10", lambda: True, raising=False
    )
    with stand_ins(RL2_GPU_ONLY, packages=("RL2",)):
        from RL2.trainer import ppo

        from xpgym.adapters.rl2 import ENV_PATH

        process_group = Recorder("initialize_global_process_group", stop=False)
        trainer = Recorder("PPOTrainer", stop=True)
        monkeypatch.setattr(ppo, "initialize_global_process_group", process_group)
        monkeypatch.setattr(ppo, "PPOTrainer", trainer)
        assert str(run_main(recipe, command[2:], monkeypatch)) == "PPOTrainer"
        original = ppo._xpgym_original_compute_advantages  # the override is installed
        assert ppo.compute_advantages is not original

    assert process_group.calls == [((), {})]
    ((config,), _), *_ = trainer.calls  # as RL2's Hydra config composed it
    assert config.rollout.env_path == ENV_PATH
    assert config.train_data.path == str(tmp_path / "train.jsonl")
    assert (config.adv.estimator, config.adv.gamma) == ("xpgym_rebn", 0.9)
    assert config.rollout.train_sampling_params.skip_special_tokens is False
    assert (config.actor.lr, config.actor.kl.coef) == (1e-6, 0.0)


# --------------------------------------------------------------------------------------
# Oat
# --------------------------------------------------------------------------------------

OAT_GPU_ONLY = [  # imported at module level by oat.interface's and oat.algorithms.ppo's imports
    "deepspeed",
    "deepspeed.ops.adam",
    "deepspeed.runtime.zero.partition_parameters",
    "deepspeed.utils",
    "vllm",
    "vllm.lora.request",
    "pyarrow.plasma",  # gone from pyarrow >= 12
    "tree",  # dm-tree, tyro, ...: Oat's CPU dependencies this machine lacks
    "tyro",
    "einops",
    "Levenshtein",
    "httpx",
    "msgspec",
    "openai",
    "scipy.special",
]


def fake_launchpad() -> dict[str, types.ModuleType]:
    """``launchpad`` (not installable here): the node and program classes Oat's
    ``get_program`` builds, keeping their arguments; ``launch`` is replaced by the test."""

    class Node:
        def __init__(self, constructor: Any, *args: Any, **kwargs: Any) -> None:
            self.constructor, self.args, self.kwargs = constructor, args, kwargs

    class Program:
        def __init__(self, name: str) -> None:
            self.name, self.nodes = name, {}

        def add_node(self, node: Node, label: str) -> Node:
            self.nodes[label] = node
            return node

    launchpad = types.ModuleType("launchpad", "Test fake of launchpad.")
    launchpad.Program, launchpad.CourierNode, launchpad.PyClassNode = Program, Node, Node
    python = types.ModuleType("launchpad.nodes.python", "Test fake of launchpad.")
    python.local_multi_processing = types.SimpleNamespace(PythonProcess=types.SimpleNamespace)
    return {"launchpad": launchpad, "launchpad.nodes": python, "launchpad.nodes.python": python}


def test_oat_launch_reaches_launchpad(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Stops at ``launchpad.launch(program, ...)``, which starts the actor (vLLM) and
    learner (DeepSpeed) processes on GPUs.

    Before it: ``oat_classes()`` (xpgym's subclasses of Oat's PPO classes), ``XpgymArgs``
    built from the recipe's fields, Oat's ``default_args_validation`` (its GPU count check
    sees ``torch.cuda.device_count`` report the ``--gpus`` asked for) and Oat's
    ``get_program`` with xpgym's actor and learner. Where launchpad is missing, a fake
    (`fake_launchpad`) records the program's nodes.
    """
    pytest.importorskip("oat", reason="needs oat-llm 0.2.x (Oat's extra)")
    import torch

    if importlib.util.find_spec("launchpad") is None:
        for name, module in fake_launchpad().items():
            monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    recipe = load_recipe("train_oat", monkeypatch)
    argv = ["train_oat.py", "--gpus", "1", "--out-dir", str(tmp_path)]
    with stand_ins(OAT_GPU_ONLY, packages=("oat",)):
        import launchpad
        import oat.interface
        from oat.types import RLAlgo

        get_program = Recorder("get_program", stop=False, wraps=oat.interface.get_program)
        launch = Recorder("launchpad.launch", stop=True)
        monkeypatch.setattr(oat.interface, "get_program", get_program)
        monkeypatch.setattr(launchpad, "launch", launch, raising=False)  # the fake has none
        assert str(run_main(recipe, argv, monkeypatch)) == "launchpad.launch"
        ppo = sys.modules["oat.algorithms.ppo"]

        ((args,), classes), *_ = get_program.calls
        assert issubclass(classes["actor_cls"], ppo.PPOActor)
        assert issubclass(classes["learner_cls"], ppo.PPOLearner)
        assert (classes["actor_cls"].__name__, classes["learner_cls"].__name__) == (
            "XpgymActor",
            "XpgymLearner",
        )
        assert type(args).__name__ == "XpgymArgs"
        assert args.algo == RLAlgo.PPO  # Oat's validation turned the name into its enum
        assert (args.env_id, args.gamma, args.norm_return) == (
            "game:GuessTheNumber-v0-easy",
            0.9,
            True,
        )
        assert args.ref_pretrain == args.pretrain == "Qwen/Qwen3-1.7B"
        (program,), kwargs = launch.calls[0]
        assert (program, kwargs["local_resources"]) == get_program.returned[0]
        assert kwargs["launch_type"] == "local_mp"
        assert sorted(kwargs["local_resources"]) == ["actor_0_0", "learner_0_0"]


# --------------------------------------------------------------------------------------
# ROLL
# --------------------------------------------------------------------------------------

ROLL_LAUNCHER = '''"""Test stand-in for ROLL's examples/start_agentic_pipeline.py: its
flags, then Hydra's initialize() relative to this file and compose(), as ROLL's launcher
does before from_dict(AgenticConfig, ...). Writes the composed config to composed.json
next to this file."""
import argparse
import json
from pathlib import Path

from hydra import compose, initialize
from omegaconf import OmegaConf

parser = argparse.ArgumentParser()
parser.add_argument("--config_path", default="config")
parser.add_argument("--config_name", default="sppo_config")
args = parser.parse_args()
initialize(config_path=args.config_path, job_name="app")
config = OmegaConf.to_container(compose(config_name=args.config_name), resolve=True)
Path(__file__).with_name("composed.json").write_text(json.dumps(config))
'''

ROLL_KEYS = {  # what ROLL's step_reinforce pipeline reads (docs/trainers.md, section ROLL)
    "adv_estimator": "step_reinforce",
    "step_reward_gamma": 0.9,
    "reward_normalization": {"grouping": "batch", "method": "mean_std"},
    "loss_agg_mode": "token-mean",
    "init_kl_coef": 0.0,
    "advantage_clip": 20,
    "batch_adjust_mode": "delete",
    "sequence_length": 16384,
}


def test_roll_launch_reaches_roll(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, hydra_state: None
) -> None:
    """Stops where ROLL itself is first used: its launcher
    ``examples/start_agentic_pipeline.py`` (stood in for by `ROLL_LAUNCHER`: ROLL is not
    installable here), after the launcher's own Hydra ``initialize``/``compose`` of the
    written YAML with the recipe's ``--config_path``/``--config_name``.

    Before it: ``ray.init`` with xpgym's GEM registration hook (recorded, not started) and
    the pipeline YAML. With ROLL importable, the composed config is also parsed into ROLL's
    ``AgenticConfig`` (``dacite.from_dict``, as the launcher does); otherwise it is checked
    against the keys ROLL's step_reinforce pipeline reads (`ROLL_KEYS`).
    """
    pytest.importorskip("ray")
    pytest.importorskip("yaml")
    import ray

    from xpgym.adapters.roll import PREFIX, ROLL_RUNTIME_ENV, STEP_REINFORCE_CONFIG

    launcher = tmp_path / "ROLL" / "examples" / "start_agentic_pipeline.py"
    launcher.parent.mkdir(parents=True)
    launcher.write_text(ROLL_LAUNCHER)
    ray_init = Recorder("ray.init", stop=False)
    monkeypatch.setattr(ray, "init", ray_init)
    recipe = load_recipe("train_roll", monkeypatch)
    out_dir = tmp_path / "out"
    argv = ["train_roll.py", "--roll-dir", "ROLL", "--out-dir", str(out_dir)]  # cwd: tmp_path
    monkeypatch.setattr(sys, "argv", argv)
    recipe.main()  # the stand-in launcher returns: the launch ends there

    assert ray_init.calls == [((), {"runtime_env": dict(ROLL_RUNTIME_ENV)})]
    config = json.loads(launcher.with_name("composed.json").read_text())
    if importlib.util.find_spec("roll") is not None:
        from dacite import from_dict
        from roll.pipeline.agentic.agentic_config import AgenticConfig

        from_dict(data_class=AgenticConfig, data=config)
    assert {key: config[key] for key in ROLL_KEYS} == ROLL_KEYS
    env = config["custom_envs"]["xpgym"]
    assert env["env_type"] == f"{PREFIX}game:GuessTheNumber-v0-easy"
    assert env["env_manager_cls"] == config["env_manager_cls"]
    assert env["env_manager_cls"] == STEP_REINFORCE_CONFIG["env_manager_cls"]
    assert (env["max_steps"], env["max_tokens_per_step"]) == (10, 4096)
    for manager in ("train_env_manager", "val_env_manager"):
        assert set(config[manager]["tags"]) <= set(config["custom_envs"])
    strategies = {
        role: config[role]["strategy_args"]["strategy_name"]
        for role in ("actor_train", "actor_infer", "reference")
    }
    assert strategies == {
        "actor_train": "fsdp2_train",
        "actor_infer": "vllm",
        "reference": "hf_infer",
    }
