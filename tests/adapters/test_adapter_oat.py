"""Oat adapter: TransitionData / Transition layout, the learner's ReBN, the engine policy,
and the actor/learner subclasses themselves.

``oat.algorithms.ppo`` imports vLLM, DeepSpeed, launchpad and a few more packages at module
level. Where they are missing (any CPU machine), `TestOatClassesOverStubs` puts clearly named
test stubs of exactly those modules into ``sys.modules`` (`oat_gpu_stack_stubs`), each with
only the attributes Oat's imports read, so `oat_classes` builds the real subclasses of Oat's
real ``PPOArgs``/``PPOActor``/``PPOLearner``. The tests then drive the overridden methods on
objects made without Oat's ``__init__`` (which starts vLLM, DeepSpeed and an IPC server).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import inspect
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip(
    "xpgym.adapters.oat", reason="needs oat-llm 0.2.x (the oat extra)", exc_type=ImportError
)
torch = pytest.importorskip("torch")

from adapter_cases import (  # noqa: E402
    GAMMA,
    REWARD_METRICS,
    TURN_RETURNS,
    TURN_REWARDS,
    episodes,
    rebn_reference,
    with_failed_member,
    with_reward_metrics,
)
from oat.types import Transition, TransitionData  # noqa: E402
from random_byte_lm import EOS_ID, tiny_tokenizer  # noqa: E402

from xpgym.adapters.oat import (  # noqa: E402
    OatEnginePolicy,
    batch_normalize,
    oat_classes,
    to_transition_data,
    to_transitions,
)
from xpgym.rollout.collector import RolloutCollector  # noqa: E402
from xpgym.rollout.curriculum import PresetLadder, SuccessRateScheduler  # noqa: E402
from xpgym.rollout.shared_curriculum import SharedCurriculum  # noqa: E402
from xpgym.training.advantages import discounted_returns, rebn, turn_rewards  # noqa: E402


def test_one_transition_per_turn_with_the_return_on_its_last_token() -> None:
    eps = episodes()
    data = to_transition_data(eps, gamma=GAMMA)
    assert all(isinstance(d, TransitionData) for d in data)
    turns = [turn for ep in eps for turn in ep.turns]
    assert len(data) == len(turns) == 7
    returns = [g for ep in TURN_RETURNS for g in ep]
    for d, turn, g in zip(data, turns, returns, strict=True):
        assert d.prompt_ids == turn.prompt_ids
        assert d.response_ids == turn.response_ids
        assert d.response_logprobs == turn.response_logprobs
        assert d.rewards[:-1] == [0.0] * (len(turn.response_ids) - 1)
        assert d.rewards[-1] == pytest.approx(g, abs=1e-12)
        assert d.loss_mask is True
    assert [(d.info["episode"], d.info["turn"]) for d in data] == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
        (1, 2),
        (2, 0),
        (3, 0),
    ]


def test_ignore_no_eos_masks_cut_generations() -> None:
    eps = episodes()
    eps[0].turns[0].info["generation_truncated"] = True
    masks = [d.loss_mask for d in to_transition_data(eps, gamma=GAMMA, ignore_no_eos=True)]
    assert masks == [False] + [True] * 6
    assert all(d.loss_mask for d in to_transition_data(eps, gamma=GAMMA))


def test_multi_turn_transitions_carry_turn_rewards_and_done() -> None:
    eps = episodes()
    eps[1].turns[0].info["invalid_action"] = True
    lists = to_transitions(eps)
    assert all(isinstance(t, Transition) for ts in lists for t in ts)
    assert [[t.rewards for t in ts] for ts in lists] == TURN_REWARDS
    assert [[t.done for t in ts] for ts in lists] == [
        [False, True],
        [False, False, True],
        [True],
        [True],
    ]
    assert [t.action_is_formatted for t in lists[1]] == [False, True, True]


def test_info_holds_numbers_that_oats_collector_can_average() -> None:
    """Oat's FeedbackCollector.get_metrics takes ``np.mean`` of every ``info`` key over the
    rows (and its multi-turn twin over the transitions): no strings, same keys everywhere."""
    rows = to_transition_data(episodes(), gamma=GAMMA)
    transitions = [t for ts in to_transitions(episodes()) for t in ts]
    for items in (rows, transitions):
        keys = set(items[0].info)
        assert all(set(item.info) == keys for item in items)
        means = {k: np.mean([item.info[k] for item in items]) for k in keys}
        assert all(np.isfinite(v) for v in means.values())
    assert np.mean([d.info["return"] for d in rows]) == pytest.approx(
        np.mean([g for ep in TURN_RETURNS for g in ep])
    )


def test_learner_rebn_on_row_sums_equals_the_reference() -> None:
    """Oat's learner sums each row's rewards (G_t) then calls the advantage hook."""
    rows = to_transition_data(episodes(), gamma=GAMMA)
    sums = torch.tensor([sum(d.rewards) for d in rows], dtype=torch.float32)
    expected = [a for ep in rebn_reference() for a in ep]
    np.testing.assert_allclose(batch_normalize(sums).numpy(), expected, atol=1e-6)


class SummingRanks:
    """``all_reduce(t)`` summing over `n` threads, one per simulated learner rank (what
    DeepSpeed's ``strategy.all_reduce(t, op="sum")`` does over ranks)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.barrier = threading.Barrier(n)
        self.pending: dict[int, torch.Tensor] = {}
        self.ops: list[str] = []

    def all_reduce(self, rank: int, t: torch.Tensor, op: str = "sum") -> torch.Tensor:
        self.ops.append(op)
        self.pending[rank] = t
        self.barrier.wait()
        total = sum(self.pending[r] for r in range(self.n))
        self.barrier.wait()  # everyone has read before anyone writes the next round
        return total

    def run(self, work: Any) -> list[Any]:
        """``work(rank)`` on every rank at once; the results in rank order."""
        results: list[Any] = [None] * self.n

        def target(rank: int) -> None:
            results[rank] = work(rank)

        threads = [threading.Thread(target=target, args=(r,)) for r in range(self.n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert not any(t.is_alive() for t in threads)
        return results


def test_batch_normalize_across_ranks_equals_one_batch() -> None:
    values = torch.tensor([0.9, 1.0, 0.095, -0.45, -0.5, 2.0, 0.0], dtype=torch.float64)
    shards = [values[:3], values[3:]]  # two learner ranks
    ranks = SummingRanks(2)
    results = ranks.run(
        lambda r: batch_normalize(shards[r], all_reduce=lambda t: ranks.all_reduce(r, t))
    )
    np.testing.assert_allclose(
        torch.cat(results).numpy(), batch_normalize(values).numpy(), atol=1e-12
    )
    flat = values.numpy()
    np.testing.assert_allclose(
        batch_normalize(values).numpy(), (flat - flat.mean()) / (flat.std() + 1e-9), atol=1e-12
    )


class ScriptedLLM:
    """Oat's ``ActorBase.generate(prompt_token_ids, sampling_params)``, vLLM-shaped outputs.

    `script(turn)` is the text answered at `turn` (0-based; the turn is the number of
    assistant messages already in the prompt), followed by the eos token, each token with
    log-prob -0.5; at `cut_turns` the eos is missing and ``finish_reason`` is ``"length"``.
    `prompts` records every prompt.
    """

    def __init__(self, tokenizer: Any, script: Any, cut_turns: frozenset[int] = frozenset()):
        self.tokenizer, self.script, self.cut_turns = tokenizer, script, cut_turns
        self.prompts: list[list[int]] = []

    def completion_ids(self, turn: int) -> list[int]:
        eos = [] if turn in self.cut_turns else [self.tokenizer.eos_token_id]
        return [*self.tokenizer.encode(self.script(turn), add_special_tokens=False), *eos]

    def __call__(self, prompts: list[list[int]], sampling_params: Any) -> list[Any]:
        outputs = []
        for prompt in prompts:
            self.prompts.append(list(prompt))
            text = self.tokenizer.decode(prompt, skip_special_tokens=False)
            turn = text.count("<|im_start|>assistant") - 1
            ids = self.completion_ids(turn)
            completion = types.SimpleNamespace(
                text=self.script(turn),
                token_ids=ids,
                finish_reason="length" if turn in self.cut_turns else "stop",
                logprobs=[{t: types.SimpleNamespace(logprob=-0.5)} for t in ids],
            )
            outputs.append(types.SimpleNamespace(outputs=[completion], prompt_token_ids=prompt))
        return outputs


def test_engine_policy_drives_the_collector_and_converts() -> None:
    import xpgym

    tokenizer = tiny_tokenizer()
    llm = ScriptedLLM(tokenizer, lambda turn: "\\boxed{0}")
    policy = OatEnginePolicy(llm, types.SimpleNamespace(max_tokens=64), tokenizer)
    vec = xpgym.make_vec("game:GuessTheNumber-v0-easy", 2)
    episodes_ = RolloutCollector(vec, policy, max_turns=2).collect(2, seed=0)
    vec.close()
    assert all(len(ep.turns) == 2 for ep in episodes_)
    assert all(turn.action == "\\boxed{0}" for ep in episodes_ for turn in ep.turns)
    data = to_transition_data(episodes_, gamma=GAMMA, tokenizer=tokenizer)
    assert data[0].prompt.startswith("<|im_start|>user\n")
    assert data[1].prompt_ids[: len(data[0].prompt_ids) + len(data[0].response_ids)] == (
        data[0].prompt_ids + data[0].response_ids
    )
    assert data[0].response_logprobs == [-0.5] * len(data[0].response_ids)


def test_actor_and_learner_need_oats_gpu_stack() -> None:
    try:
        importlib.import_module("oat.algorithms.ppo")
    except ImportError:
        with pytest.raises(ImportError, match=r"xpgym\[oat\]"):
            oat_classes()
    else:  # a GPU install: the classes build (TestOatClassesOverStubs tests them)
        args_cls, actor_cls, learner_cls = oat_classes()
        assert args_cls().gamma == 0.9
        assert {"step"} <= set(vars(actor_cls))
        assert {"compute_monte_carlo_advantages", "prepare_data"} <= set(vars(learner_cls))


# --------------------------------------------------------------------------------------
# Oat's real PPO classes over test stubs of its GPU stack
# --------------------------------------------------------------------------------------

OAT_GPU_STACK_STUBS: dict[str, dict[str, tuple[str, ...]]] = {
    # missing package -> {module Oat imports: the attributes its module-level code reads}.
    # A dotted name found in sys.modules imports without its parents, so only these exist.
    "deepspeed": {  # oat/algorithms/ppo.py, learners/base.py, utils/deepspeed.py, ...
        "deepspeed": (),
        "deepspeed.ops.adam": ("DeepSpeedCPUAdam", "FusedAdam"),
        "deepspeed.runtime.zero.partition_parameters": ("ZeroParamStatus",),
        "deepspeed.utils": ("safe_get_full_grad",),
    },
    "vllm": {  # oat/actors/base.py, actors/preference.py
        "vllm": ("SamplingParams",),
        "vllm.lora.request": ("LoRARequest",),
    },
    "launchpad": {"launchpad": ()},  # oat/learners/base.py, utils/ipc.py
    "pyarrow.plasma": {"pyarrow.plasma": ()},  # oat/utils/ipc.py (gone from pyarrow >= 12)
    "tree": {"tree": ()},  # dm-tree: oat/algorithms/ppo.py, collectors, learners
    "tyro": {"tyro": ()},  # oat/args.py
    "einops": {"einops": ()},  # oat/rm/model.py, exploration.py
    "Levenshtein": {"Levenshtein": ()},  # oat/collectors/base.py
    "httpx": {"httpx": ()},  # oat/oracles/remote/client.py
    "msgspec": {"msgspec": ()},  # oat/oracles/remote/client.py
    "openai": {"openai": ("OpenAI",)},  # oat/oracles/gpt.py
    "scipy": {"scipy.special": ("logsumexp",)},  # oat/oracles/gpt.py
}


def _missing(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is None
    except ModuleNotFoundError:  # its parent package is missing too
        return True


def _stub_module(name: str, attributes: tuple[str, ...]) -> types.ModuleType:
    """A test stub of module `name`: only `attributes`, each a class that refuses use."""
    module = types.ModuleType(name, f"Test stub of {name} (tests/adapters/test_adapter_oat.py).")
    module.__spec__ = importlib.machinery.ModuleSpec(name, loader=None)  # for find_spec

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError(f"{name} is a test stub: the code under test must not call it")

    for attribute in attributes:
        setattr(module, attribute, type(attribute, (), {"__init__": refuse}))
    return module


@pytest.fixture(scope="class")
def oat_gpu_stack_stubs() -> Iterator[list[str]]:
    """Test stubs of the packages ``oat.algorithms.ppo`` imports at module level and this
    machine lacks (none on a full GPU install), then Oat's real modules imported over them.

    Yields the stubbed packages. Afterwards the stubs and every ``oat`` module imported
    over them leave ``sys.modules`` again.
    """
    before = set(sys.modules)
    stubbed = [package for package in OAT_GPU_STACK_STUBS if _missing(package)]
    with pytest.MonkeyPatch.context() as mp:
        for package in stubbed:
            for name, attributes in OAT_GPU_STACK_STUBS[package].items():
                mp.setitem(sys.modules, name, _stub_module(name, attributes))
        try:
            try:
                importlib.import_module("oat.algorithms.ppo")
            except ImportError as exc:  # a dependency Oat shares with CPU installs
                pytest.skip(f"oat.algorithms.ppo needs a package not stubbed here: {exc}")
            yield stubbed
        finally:
            for name in sorted(set(sys.modules) - before, reverse=True):
                if name == "oat" or name.startswith("oat."):
                    parent, _, child = name.rpartition(".")
                    if getattr(sys.modules.get(parent), child, None) is sys.modules[name]:
                        delattr(sys.modules[parent], child)
                    del sys.modules[name]


class GuessingScript:
    """GuessTheNumber-v0-easy (1..10, 4 turns): first an answer with no ``\\boxed{}``
    (invalid, -0.1), then ``\\boxed{1}``, ``\\boxed{2}``, ``\\boxed{3}``. So an episode whose
    target is 1..3 is won (reward 1.0) on turn ``target``, else it runs out after 4 turns."""

    def __call__(self, turn: int) -> str:
        return "no guess yet" if turn == 0 else f"\\boxed{{{turn}}}"

    @staticmethod
    def check_rewards(episode: Any) -> None:
        """The env judged the scripted answers as the docstring says."""
        rewards = [turn.reward for turn in episode.turns]
        last = episode.turns[-1]
        assert rewards[0] == pytest.approx(-0.1)
        assert episode.turns[0].info["invalid_action"] is True
        if last.terminated:  # won with the guess of the last turn
            assert 2 <= len(rewards) <= 4
            assert rewards[1:] == [0.0] * (len(rewards) - 2) + [1.0]
        else:
            assert last.truncated
            assert len(rewards) == 4
            assert rewards[1:] == [0.0, 0.0, 0.0]


class CollectSpy:
    """Wraps `RolloutCollector.collect` to record each call's seed and episodes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[int, list[Any]]] = []
        collect = RolloutCollector.collect

        def spy(collector: Any, num_episodes: int, **kwargs: Any) -> list[Any]:
            result = collect(collector, num_episodes, **kwargs)
            self.calls.append((kwargs["seed"], result))
            return result

        monkeypatch.setattr(RolloutCollector, "collect", spy)


class RecordingIPC:
    """Oat's ``PlasmaShmClient`` as the actor uses it: ``serialize_ipc(data) -> handle``."""

    def __init__(self) -> None:
        self.sent: list[list[Any]] = []

    def serialize_ipc(self, data: list[Any]) -> str:
        self.sent.append(data)
        return f"handle-{len(self.sent)}"


class RecordingStrategy:
    """The parts of Oat's ``DeepspeedStrategy`` the learner hooks use."""

    def __init__(self, args: Any, world_size: int = 1, ranks: Any = None, rank: int = 0) -> None:
        self.args, self.world_size, self.ranks, self.rank = args, world_size, ranks, rank
        self.dataloaders: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def setup_dataloader(self, *args: Any, **kwargs: Any) -> str:
        self.dataloaders.append((args, kwargs))
        return f"dataloader-{len(self.dataloaders)}"

    def all_reduce(self, t: torch.Tensor, op: str = "mean") -> torch.Tensor:
        assert op == "sum"
        return t if self.ranks is None else self.ranks.all_reduce(self.rank, t, op)


def oat_learner_inputs(rows: list[Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(rewards, response_masks)`` as Oat's ``PPOLearner.learning_step`` hands them to the
    advantage hook (oat/algorithms/ppo.py:366-387, 451-453, no KL): ``[B, L - 1]``, the
    right-padded next-token view; each row's last reward on its last response position."""
    lengths = [len(r.prompt_ids) + len(r.response_ids) for r in rows]
    completion = torch.zeros(len(rows), max(lengths), dtype=torch.bool)
    for i, r in enumerate(rows):
        completion[i, len(r.prompt_ids) : lengths[i]] = True
    response_masks = completion[:, 1:]
    rewards = torch.zeros(response_masks.shape)
    for i, r in enumerate(rows):
        last = int(torch.nonzero(response_masks[i]).max())
        rewards[i, last] = float(r.rewards[-1])
    return rewards, response_masks


def _bare(cls: type) -> Any:
    """An instance without Oat's ``__init__`` (vLLM engine, DeepSpeed, IPC server)."""
    return cls.__new__(cls)


@pytest.fixture(scope="class")
def classes(oat_gpu_stack_stubs: list[str]) -> tuple[Any, Any, Any, Any]:
    """``(XpgymArgs, XpgymActor, XpgymLearner, oat.algorithms.ppo)`` over the stubs."""
    args_cls, actor_cls, learner_cls = oat_classes()
    return args_cls, actor_cls, learner_cls, sys.modules["oat.algorithms.ppo"]


class TestOatClassesOverStubs:
    def test_stubs_only_stand_in_for_what_is_missing(self, oat_gpu_stack_stubs: list[str]) -> None:
        for package in oat_gpu_stack_stubs:
            for name in OAT_GPU_STACK_STUBS[package]:
                assert "test stub" in sys.modules[name].__doc__.lower()
        for package in set(OAT_GPU_STACK_STUBS) - set(oat_gpu_stack_stubs):
            for name in OAT_GPU_STACK_STUBS[package]:
                assert "test stub" not in (sys.modules[name].__doc__ or "").lower()
        ppo = sys.modules["oat.algorithms.ppo"]
        assert ppo.__file__.endswith("oat/algorithms/ppo.py")  # Oat's own module

    def test_subclasses_override_oats_methods_with_oats_signatures(self, classes: Any) -> None:
        args_cls, actor_cls, learner_cls, ppo = classes
        assert issubclass(args_cls, ppo.PPOArgs)
        assert issubclass(actor_cls, ppo.PPOActor)
        assert issubclass(learner_cls, ppo.PPOLearner)
        base = sys.modules["oat.learners.base"].LearnerBase
        for cls, name, oat_cls in [
            (actor_cls, "step", ppo.PPOActor),
            (learner_cls, "compute_monte_carlo_advantages", ppo.PPOLearner),
            (learner_cls, "prepare_data", base),
        ]:
            assert name in vars(cls)
            ours = inspect.signature(getattr(cls, name)).parameters
            theirs = inspect.signature(getattr(oat_cls, name)).parameters
            assert list(ours) == list(theirs)
            assert [p.default for p in ours.values()] == [p.default for p in theirs.values()]

    def test_args_defaults(self, classes: Any) -> None:
        args_cls, _, _, ppo = classes
        args = args_cls()
        assert (args.env_id, args.gamma, args.max_turns) == ("game:GuessTheNumber-v0-easy", 0.9, 10)
        assert (args.num_envs, args.episodes_per_step, args.norm_return) == (16, 16, True)
        assert args.curriculum == ""  # no curriculum: args.env_id as registered
        assert args.num_samples == 1  # one generation per prompt: the engine policy reads one
        assert args.eval_steps == -1  # no prompt dataset or oracle to evaluate with
        assert args.critic_type == "drgrpo"  # Oat's default, a route to the MC advantage hook
        oat_defaults = ppo.PPOArgs()
        assert (oat_defaults.num_samples, oat_defaults.eval_steps) == (2, 20)
        assert args.learning_rate == oat_defaults.learning_rate  # the rest is Oat's

    def _actor(self, classes: Any, **overrides: Any) -> Any:
        args_cls, actor_cls, _, _ = classes
        tokenizer = tiny_tokenizer()
        actor = _bare(actor_cls)
        actor.args = args_cls(
            **{"num_envs": 2, "episodes_per_step": 2, "seed": 1, "gamma": GAMMA, **overrides}
        )
        actor.actor_id = 0
        actor.tokenizer = tokenizer
        actor.generate = ScriptedLLM(tokenizer, GuessingScript())
        actor.sampling_params = types.SimpleNamespace(n=1, max_tokens=64, logprobs=1)
        actor.ipc_client = RecordingIPC()
        return actor

    def test_actor_step_plays_episodes_and_returns_one_row_per_prompt(
        self, classes: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        spy = CollectSpy(monkeypatch)
        actor = self._actor(classes)
        script = actor.generate
        handles = [actor.step([""] * n, [""] * n) for n in (5, 9)]
        assert handles == ["handle-1", "handle-2"]
        seeds = [seed for seed, _ in spy.calls]
        assert len(set(seeds)) == len(seeds) >= 2  # a new seed for every round of every step

        start = 0
        for n, rows in zip((5, 9), actor.ipc_client.sent, strict=True):
            # This step's rounds: the fewest that hold n turns.
            turns = 0
            for end in range(start, len(spy.calls)):
                turns += sum(len(ep.turns) for ep in spy.calls[end][1])
                if turns >= n:
                    break
            step_episodes = [ep for _, eps in spy.calls[start : end + 1] for ep in eps]
            assert len(step_episodes) == 2 * (end + 1 - start)  # episodes_per_step each
            start = end + 1

            assert len(rows) == n  # Oat's collector splits rows among ranks by prompt
            assert all(isinstance(r, TransitionData) for r in rows)
            keys = [(r.info["episode"], r.info["turn"]) for r in rows]
            assert keys == sorted(set(keys))  # distinct rows, in episode order
            for episode in step_episodes:
                GuessingScript.check_rewards(episode)  # complete, judged by the env
            for row, (e, t) in zip(rows, keys, strict=True):
                episode = step_episodes[e]
                returns, g = [], 0.0
                for turn in reversed(episode.turns):
                    g = turn.reward + GAMMA * g
                    returns.insert(0, g)
                assert row.rewards[-1] == pytest.approx(returns[t], abs=1e-12)
                assert row.rewards[:-1] == [0.0] * (len(row.rewards) - 1)
                # Only the sampled tokens are trained: the env's tokens stay in the prompt.
                assert row.response_ids == script.completion_ids(t)
                assert row.response_ids[-1] == EOS_ID
                assert row.response_logprobs == [-0.5] * len(row.response_ids)
                assert row.prompt_ids == episode.turns[t].prompt_ids
                assert row.prompt_ids in script.prompts
                text = actor.tokenizer.decode(row.prompt_ids, skip_special_tokens=False)
                assert text.endswith("<|im_start|>assistant\n")
                assert text.count("<|im_start|>user\n") == t + 1  # env observations so far
                assert row.loss_mask is True
        assert start == len(spy.calls)  # no step collected a round it did not need
        won = [ep.turns[-1].terminated for _, eps in spy.calls for ep in eps]
        assert any(won)  # returns with a discounted 1.0 were checked,
        assert not all(won)  # and lost episodes' too

        # Same seed and actor id, same rounds.
        spy.calls.clear()
        again = self._actor(classes)
        again.step([""] * 5, [""] * 5)
        assert spy.calls[0][0] == seeds[0]
        other = self._actor(classes, seed=8)
        other.step([""] * 5, [""] * 5)
        assert spy.calls[-1][0] != seeds[0]

    def test_actor_step_plays_the_shared_curriculums_level_and_feeds_it(
        self, classes: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
    ) -> None:
        """With ``XpgymArgs.curriculum``, each collection round plays the file's level at
        its start, and the file ends as one scheduler fed the rounds' episodes in order."""
        ladders = [PresetLadder("game:GuessTheNumber-v0")]
        rule = {"window": 1, "start_level": 1}
        shared = SharedCurriculum.create(tmp_path / "c.json", ladders, **rule)
        spy = CollectSpy(monkeypatch)
        actor = self._actor(classes, curriculum=str(shared.path))
        local = SuccessRateScheduler(ladders, **rule)
        for n in (5, 9, 9):
            actor.step([""] * n, [""] * n)
        played = []
        for _, round_episodes in spy.calls:
            levels = {ep.turns[-1].info["curriculum"]["level"] for ep in round_episodes}
            assert levels == {local.levels["game:GuessTheNumber-v0"]}
            played += levels
            local.observe(round_episodes)
        assert len(set(played)) > 1  # the level moved between rounds
        assert shared.scheduler().state_dict() == local.state_dict()
        assert shared.results == sum(len(eps) for _, eps in spy.calls)

    def test_actor_step_masks_cut_generations_with_ignore_no_eos(self, classes: Any) -> None:
        for ignore_no_eos in (False, True):
            actor = self._actor(classes, ignore_no_eos=ignore_no_eos)
            actor.generate = ScriptedLLM(actor.tokenizer, GuessingScript(), frozenset({0}))
            actor.step([""] * 9, [""] * 9)
            [rows] = actor.ipc_client.sent
            cut = [r.info["turn"] == 0 for r in rows]
            assert any(cut)
            assert not all(cut)
            assert [r.response_ids[-1] != EOS_ID for r in rows] == cut
            assert [r.loss_mask for r in rows] == [not (ignore_no_eos and c) for c in cut]

    @pytest.mark.parametrize("ranks", [1, 2])
    def test_learner_advantages_are_rebn_of_the_turn_returns(
        self, classes: Any, ranks: int
    ) -> None:
        args_cls, _, learner_cls, _ = classes
        rows = to_transition_data(episodes(), gamma=GAMMA)
        rewards, response_masks = oat_learner_inputs(rows)
        assert response_masks.sum(-1).tolist() == [len(r.response_ids) for r in rows]
        turn_r, mask = turn_rewards(episodes())
        expected = rebn(discounted_returns(turn_r, mask, GAMMA), mask)[mask]  # population std
        np.testing.assert_allclose(expected, [a for ep in rebn_reference() for a in ep])

        summing = SummingRanks(ranks)
        shards = np.array_split(np.arange(len(rows)), ranks)

        def learner_on(rank: int) -> torch.Tensor:
            learner = _bare(learner_cls)
            learner.args = args_cls()
            learner.strategy = RecordingStrategy(learner.args, ranks, summing, rank)
            index = torch.as_tensor(shards[rank])
            return learner.compute_monte_carlo_advantages(rewards[index], response_masks[index])

        got = torch.cat(summing.run(learner_on))
        assert got.shape == (len(rows),)
        assert got.dtype == torch.float32
        np.testing.assert_allclose(got.numpy(), expected, atol=1e-6)
        assert set(summing.ops) == {"sum"}

        raw = _bare(learner_cls)
        raw.args = args_cls(norm_return=False)
        raw.strategy = None  # no reduction without normalisation
        np.testing.assert_allclose(
            raw.compute_monte_carlo_advantages(rewards, response_masks).numpy(),
            [g for ep in TURN_RETURNS for g in ep],
            atol=1e-6,
        )

    def test_learner_prepare_data_needs_no_prompt_dataset(self, classes: Any) -> None:
        args_cls, _, learner_cls, _ = classes
        args = args_cls(
            rollout_batch_size=64,
            rollout_batch_size_per_device=16,
            pi_buffer_maxlen_per_device=32,
            max_queries=1000,
        )
        learner = _bare(learner_cls)
        strategy = RecordingStrategy(args, world_size=2)
        learner.prepare_data(strategy, tiny_tokenizer())
        [(positional, keywords)] = strategy.dataloaders
        assert positional == (learner.prompts_dataset, 16)
        assert keywords == {"pin_memory": True, "shuffle": False}
        assert learner.prompts_dataloader == "dataloader-1"
        dataset = learner.prompts_dataset
        assert len(dataset) == 1000  # one item per row of the budget
        assert dataset[0] == dataset[999] == ("", "", "")
        # Oat's run loop unpacks each batch into (formatted prompts, prompts, references).
        loader = torch.utils.data.DataLoader(dataset, batch_size=16)
        formatted, raw, refs = next(iter(loader))
        assert list(formatted) == list(raw) == list(refs) == [""] * 16

        unset = args_cls(pi_buffer_maxlen_per_device=128, max_queries=-1, max_train=300)
        learner.prepare_data(RecordingStrategy(unset), None)
        assert len(learner.prompts_dataset) == 300  # Oat's rule: max_train when unset

        small = args_cls(rollout_batch_size=64, pi_buffer_maxlen_per_device=31)
        with pytest.raises(ValueError, match="pi_buffer_maxlen_per_device"):
            learner.prepare_data(RecordingStrategy(small, world_size=2), None)


# --------------------------------------------------------------------------------------
# Infrastructure failures (xpgym.core.errors)
# --------------------------------------------------------------------------------------


def test_infra_error_episodes_give_no_rows_so_rebn_is_that_of_the_others() -> None:
    rows = to_transition_data(with_failed_member(), gamma=GAMMA)
    base = to_transition_data(episodes(), gamma=GAMMA)
    assert [row.rewards for row in rows] == [row.rewards for row in base]
    assert [row.info for row in rows] == [row.info for row in base]
    returns = torch.tensor([row.rewards[-1] for row in rows])
    want = torch.tensor([row.rewards[-1] for row in base])
    assert torch.equal(batch_normalize(returns), batch_normalize(want))
    assert len(to_transitions(with_failed_member())) == len(episodes())


def test_reward_function_metrics_reach_oats_actor_metrics() -> None:
    # Oat averages every info key over the rows: each row carries the batch's means
    data = to_transition_data(with_reward_metrics(), gamma=GAMMA)
    assert all(REWARD_METRICS.items() <= row.info.items() for row in data)
    for transitions in to_transitions(with_reward_metrics()):
        assert all(REWARD_METRICS.items() <= t.info.items() for t in transitions)
