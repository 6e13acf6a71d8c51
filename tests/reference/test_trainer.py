"""Specification of the reference PyTorch trainer, `xpgym.reference.trainer` and its losses.

The loss pieces against hand-computed values on tiny tensors; the trainer's batch against
`xpgym.training.advantages` and the token layouts; end to end, a few steps on GuessTheNumber-easy
with the tiny LM of tests/random_byte_lm.py through `RolloutCollector` + `HFPolicy`.
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
random_byte_lm = pytest.importorskip("random_byte_lm")

from adapter_cases import REWARD_METRICS, with_reward_metrics  # noqa: E402

import xpgym  # noqa: E402
from xpgym.core.chat import ChatPromptBuilder  # noqa: E402
from xpgym.core.env import Wrapper  # noqa: E402
from xpgym.core.errors import InfraCause  # noqa: E402
from xpgym.core.trajectory import Episode, Turn  # noqa: E402
from xpgym.reference.losses import (  # noqa: E402
    aggregate_loss,
    entropy_from_logits,
    kl_penalty,
    logprobs_from_logits,
    policy_loss,
    token_logprobs,
    value_loss,
)
from xpgym.reference.trainer import Trainer, TrainerConfig, train  # noqa: E402
from xpgym.rollout.collector import RolloutCollector  # noqa: E402
from xpgym.rollout.policies.hf import HFPolicy  # noqa: E402
from xpgym.training.advantages import (  # noqa: E402
    broadcast_to_tokens,
    discounted_returns,
    dr_grpo,
    episode_scores,
    episode_terminated,
    grpo,
    rebn,
    rloo,
    turn_gae,
    turn_rewards,
)

torch.set_num_threads(1)

EASY = "game:GuessTheNumber-v0-easy"


# -- helpers ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer():
    return random_byte_lm.tiny_tokenizer()


def make_episode(
    tokenizer, rewards: list[float], *, group_id: str, seed: int, terminated: bool = True
) -> Episode:
    """A prefix-consistent chat episode with random lowercase responses ending in eos."""
    rng = np.random.default_rng(seed)
    builder = ChatPromptBuilder(tokenizer)
    prompt = builder.start("Guess a number from 1 to 10.")
    turns = []
    for t, reward in enumerate(rewards):
        length = int(rng.integers(2, 6))
        response = [int(x) for x in rng.integers(97, 123, size=length)] + [random_byte_lm.EOS_ID]
        last = t == len(rewards) - 1
        turns.append(
            Turn(
                observation=f"obs {t}",
                action=tokenizer.decode(response[:-1]),
                reward=reward,
                terminated=last and terminated,
                truncated=last and not terminated,
                prompt_ids=prompt,
                response_ids=response,
                response_logprobs=[-1.0] * len(response),
            )
        )
        prompt = builder.extend(prompt, response, f"Turn {t + 1}: the number is lower.")
    return Episode("toy", seed=seed, group_id=group_id, turns=turns)


@pytest.fixture(scope="module")
def episodes(tokenizer):
    """Two groups of two episodes, of 1 to 4 turns, some truncated."""
    return [
        make_episode(tokenizer, [0.0, 0.0, 1.0], group_id="a", seed=1),
        make_episode(tokenizer, [0.0, -0.1, 0.0, 0.0], group_id="a", seed=2, terminated=False),
        make_episode(tokenizer, [1.0], group_id="b", seed=3),
        make_episode(tokenizer, [0.0, 0.5], group_id="b", seed=4, terminated=False),
    ]


def config(**overrides) -> TrainerConfig:
    return TrainerConfig(**{"num_episodes": 4, "group_size": 2, "lr": 1e-3, **overrides})


class ByteSumBonus(Wrapper):
    """Adds ``sum of the action's UTF-8 bytes / 1e4`` to the reward: a random LM never finds
    the number, and without this every episode would score the same (zero GRPO advantage)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward + sum(action.encode()) / 1e4, terminated, truncated, info


# -- loss aggregation ---------------------------------------------------------------------

LOSS = torch.tensor([[1.0, 2.0, 3.0, 9.0], [4.0, 9.0, 9.0, 9.0]])
MASK = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]])


def test_token_mean_divides_the_masked_sum_by_the_number_of_loss_tokens():
    assert aggregate_loss(LOSS, MASK, "token-mean").item() == pytest.approx((1 + 2 + 3 + 4) / 4)


def test_seq_mean_token_mean_averages_the_per_row_token_means():
    got = aggregate_loss(LOSS, MASK, "seq-mean-token-mean").item()
    assert got == pytest.approx(((1 + 2 + 3) / 3 + 4 / 1) / 2)


def test_seq_mean_token_sum_averages_the_per_row_sums():
    assert aggregate_loss(LOSS, MASK, "seq-mean-token-sum").item() == pytest.approx((6 + 4) / 2)


def test_seq_mean_token_sum_norm_divides_row_sums_by_a_constant_then_averages_rows():
    got = aggregate_loss(LOSS, MASK, "seq-mean-token-sum-norm", loss_scale_factor=10.0)
    assert got.item() == pytest.approx((6 / 10 + 4 / 10) / 2)
    default = aggregate_loss(LOSS, MASK, "seq-mean-token-sum-norm")  # C = L = 4
    assert default.item() == pytest.approx((6 / 4 + 4 / 4) / 2)


def test_seq_modes_do_not_count_rows_without_loss_tokens():
    loss = torch.cat([LOSS, torch.full((1, 4), 7.0)])
    mask = torch.cat([MASK, torch.zeros(1, 4, dtype=torch.long)])
    for mode in ("seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"):
        assert aggregate_loss(loss, mask, mode).item() == pytest.approx(
            aggregate_loss(LOSS, MASK, mode).item()
        )


def test_aggregation_ignores_values_off_the_mask_even_nan():
    loss = LOSS.clone().requires_grad_()
    for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"):
        poisoned = torch.where(MASK.bool(), loss, torch.nan)
        out = aggregate_loss(poisoned, MASK, mode)
        assert math.isfinite(out.item())
        (grad,) = torch.autograd.grad(out, loss)
        assert torch.all(grad[~MASK.bool()] == 0)


def test_an_empty_mask_aggregates_to_zero():
    zeros = torch.zeros_like(MASK)
    for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"):
        assert aggregate_loss(LOSS, zeros, mode).item() == 0.0


def test_unknown_aggregation_mode_is_refused_with_a_suggestion():
    with pytest.raises(ValueError, match="did you mean 'token-mean'"):
        aggregate_loss(LOSS, MASK, "token_mean")  # type: ignore[arg-type]


# -- PPO-clip policy loss -----------------------------------------------------------------


def clipped_grad(advantage: float, ratio: float, **kwargs) -> tuple[float, float]:
    """Loss and d loss / d logprob of one token with ``old_logprob = 0``."""
    logprob = torch.tensor([[math.log(ratio)]], requires_grad=True)
    loss, _ = policy_loss(
        logprob, torch.zeros(1, 1), torch.tensor([[advantage]]), torch.ones(1, 1), **kwargs
    )
    (grad,) = torch.autograd.grad(loss.sum(), logprob)
    return loss.item(), grad.item()


def test_at_ratio_one_the_gradient_is_the_policy_gradient():
    logprobs = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
    advantages = torch.tensor([[2.0, -1.0, 0.5]])
    mask = torch.tensor([[1, 1, 0]])
    loss, clipped = policy_loss(logprobs, logprobs.detach(), advantages, mask)
    total = aggregate_loss(loss, mask, "token-mean")
    (grad,) = torch.autograd.grad(total, logprobs)
    assert torch.allclose(grad, torch.tensor([[-2.0 / 2, 1.0 / 2, 0.0]]))
    assert total.item() == pytest.approx(-(2.0 - 1.0) / 2)
    assert not clipped.any()


@pytest.mark.parametrize(
    ("advantage", "ratio", "clipped"),
    [
        (1.0, 1.5, True),  # A > 0: no gain from pushing the ratio above 1 + eps
        (-1.0, 0.5, True),  # A < 0: no gain from pushing it below 1 - eps
        (1.0, 0.5, False),  # the unclipped side keeps its gradient
        (-1.0, 1.5, False),
        (1.0, 1.1, False),  # inside the range
    ],
)
def test_a_ratio_outside_the_clip_range_has_zero_gradient_on_the_clipped_side(
    advantage, ratio, clipped
):
    loss, grad = clipped_grad(advantage, ratio, clip_eps_low=0.2, clip_eps_high=0.2)
    if clipped:
        assert grad == 0.0
        assert loss == pytest.approx(-advantage * min(max(ratio, 0.8), 1.2))
    else:
        assert grad == pytest.approx(-advantage * ratio)
        assert loss == pytest.approx(-advantage * ratio)


def test_clip_high_is_separate_from_clip_low():
    assert clipped_grad(1.0, 1.25, clip_eps_low=0.2, clip_eps_high=0.28)[1] != 0.0
    assert clipped_grad(1.0, 1.3, clip_eps_low=0.2, clip_eps_high=0.28)[1] == 0.0
    assert clipped_grad(-1.0, 0.75, clip_eps_low=0.2, clip_eps_high=0.28)[1] == 0.0


def test_dual_clip_bounds_the_loss_of_negative_advantages():
    loss, grad = clipped_grad(-1.0, 5.0, dual_clip_c=3.0)
    assert (loss, grad) == (pytest.approx(3.0), 0.0)
    assert clipped_grad(-1.0, 2.0, dual_clip_c=3.0)[0] == pytest.approx(2.0)
    assert clipped_grad(1.0, 5.0, dual_clip_c=3.0)[0] == pytest.approx(-1.2)  # A > 0 untouched


def test_clipped_tokens_are_flagged_only_on_the_mask():
    logprobs = torch.log(torch.tensor([[1.5, 1.5, 1.0]]))
    _, clipped = policy_loss(
        logprobs, torch.zeros(1, 3), torch.ones(1, 3), torch.tensor([[1, 0, 1]])
    )
    assert clipped.tolist() == [[True, False, False]]


# -- KL, entropy, value loss --------------------------------------------------------------


def test_kl_estimators_follow_their_formulas():
    logp = torch.tensor([[-1.0, -2.0]])
    ref = torch.tensor([[-1.5, -1.0]])
    d = ref - logp  # log(pi_ref / pi_theta) = [-0.5, 1.0]
    assert torch.allclose(kl_penalty(logp, ref, "k1"), -d)
    assert torch.allclose(kl_penalty(logp, ref, "k2"), 0.5 * d**2)
    assert torch.allclose(kl_penalty(logp, ref, "k3"), torch.exp(d) - d - 1)
    assert torch.allclose(
        kl_penalty(logp, ref, "k3"),
        torch.tensor([[math.exp(-0.5) + 0.5 - 1, math.exp(1.0) - 2.0]]),
    )


def test_k3_is_zero_where_the_policies_agree_and_positive_elsewhere():
    logp = torch.tensor([[-1.0, -1.0, -3.0]])
    k3 = kl_penalty(logp, torch.tensor([[-1.0, -0.2, -1.0]]), "k3")
    assert k3[0, 0].item() == 0.0
    assert (k3[0, 1:] > 0).all()


def test_kl_is_zero_off_the_mask_without_overflow():
    logp = torch.tensor([[-1.0, -500.0]], requires_grad=True)
    k3 = kl_penalty(logp, torch.tensor([[-1.1, 0.0]]), "k3", torch.tensor([[1, 0]]))
    (grad,) = torch.autograd.grad(k3.sum(), logp)
    assert k3[0, 1].item() == 0.0
    assert torch.isfinite(grad).all()
    assert grad[0, 1].item() == 0.0


def test_entropy_is_that_of_the_tempered_distribution_before_each_token():
    logits = torch.tensor([[[0.0, 0.0], [math.log(3.0), 0.0], [5.0, 5.0]]])
    entropy = entropy_from_logits(logits, temperature=1.0)
    p = torch.tensor([0.75, 0.25])
    assert entropy[0, 0].item() == 0.0
    assert entropy[0, 1].item() == pytest.approx(math.log(2.0))
    assert entropy[0, 2].item() == pytest.approx(-(p * p.log()).sum().item())
    hot = entropy_from_logits(logits, temperature=1e6)
    assert hot[0, 2].item() == pytest.approx(math.log(2.0))


def test_value_loss_is_half_the_worse_of_the_clipped_and_unclipped_squared_errors():
    values = torch.tensor([[0.0, 1.0, 0.5]])
    old = torch.tensor([[0.0, 0.0, 0.0]])
    returns = torch.tensor([[1.0, 0.0, 9.0]])
    mask = torch.tensor([[1, 1, 0]])
    # token 0: unclipped (0-1)^2 = 1, clipped V=0 -> 1; token 1: (1-0)^2 = 1, clipped 0.2^2
    assert value_loss(values, old, returns, mask, clip_eps=0.2).item() == pytest.approx(0.5)
    values = torch.tensor([[0.5, 0.0, 0.0]])  # clipped to 0.2: (0.2-1)^2 = 0.64 > 0.25
    assert value_loss(values, old, returns, mask, clip_eps=0.2).item() == pytest.approx(
        0.5 * (0.64 + 0.0) / 2
    )
    assert value_loss(values, old, returns, mask, clip_eps=None).item() == pytest.approx(
        0.5 * 0.25 / 2
    )


# -- log-probs ----------------------------------------------------------------------------


def test_token_logprobs_equal_a_manual_gather_from_a_forward_pass():
    model = random_byte_lm.tiny_model(seed=0)
    ids = torch.tensor([[257, 10, 20, 30, 40], [257, 50, 60, 256, 256]])
    attention = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    with torch.no_grad():
        got = token_logprobs(model, ids, attention, temperature=0.7)
        logits = model(input_ids=ids, attention_mask=attention).logits
    for b in range(2):
        assert got[b, 0].item() == 0.0
        for j in range(1, int(attention[b].sum())):
            want = torch.log_softmax(logits[b, j - 1] / 0.7, dim=-1)[ids[b, j]]
            assert got[b, j].item() == pytest.approx(want.item(), abs=1e-6)


def test_right_padding_does_not_change_a_rows_log_probs():
    model = random_byte_lm.tiny_model(seed=0)
    alone = torch.tensor([[257, 50, 60]])
    padded = torch.tensor([[257, 50, 60, 256, 256], [257, 1, 2, 3, 4]])
    with torch.no_grad():
        one = token_logprobs(model, alone, torch.ones_like(alone))
        two = token_logprobs(model, padded, (padded != 256).long())
    assert torch.allclose(one[0], two[0, :3], atol=1e-6)


def test_logprobs_from_logits_shift_by_one():
    logits = torch.log(torch.tensor([[[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]]]))
    ids = torch.tensor([[1, 1, 0]])
    got = logprobs_from_logits(logits, ids)
    assert torch.allclose(got, torch.log(torch.tensor([[1.0, 0.5, 0.9]])))


# -- the batch: advantages, masks, values -------------------------------------------------


def core_advantages(algorithm: str, eps: list[Episode], cfg: TrainerConfig) -> np.ndarray:
    r, m = turn_rewards(eps)
    groups = [e.group_id for e in eps]
    if algorithm == "reinforce":
        return discounted_returns(r, m, cfg.gamma)
    if algorithm == "rebn":
        return rebn(discounted_returns(r, m, cfg.gamma), m)
    fn = {"grpo": grpo, "dr_grpo": dr_grpo, "rloo": rloo}[algorithm]
    return np.where(m, fn(episode_scores(r, m), groups)[:, None], 0.0)


@pytest.mark.parametrize("layout", ["per_episode", "per_turn"])
@pytest.mark.parametrize("algorithm", ["reinforce", "rebn", "grpo", "dr_grpo", "rloo"])
def test_advantages_are_those_of_the_core_reference(episodes, algorithm, layout):
    cfg = config(algorithm=algorithm, layout=layout, gamma=0.9)
    batch = Trainer(random_byte_lm.tiny_model(seed=0), cfg).make_batch(episodes)
    want = core_advantages(algorithm, episodes, cfg)
    np.testing.assert_array_equal(batch.turn_advantages, want)
    tokens = broadcast_to_tokens(want[batch.rows.episode_index], batch.rows.turn_index)
    assert torch.equal(batch.advantages, torch.as_tensor(tokens, dtype=torch.float32))
    assert np.abs(want).sum() > 0


@pytest.mark.parametrize("algorithm", ["rebn", "grpo"])
def test_an_infra_error_member_is_left_out_of_the_batch_and_counted(tokenizer, episodes, algorithm):
    failed = make_episode(tokenizer, [5.0], group_id="a", seed=5)
    failed.infra_error = InfraCause("sub_env_crash", "RuntimeError: env bug")
    cfg = config(algorithm=algorithm, gamma=0.9)
    trainer = Trainer(random_byte_lm.tiny_model(seed=0), cfg)
    with_failed = trainer.make_batch([*episodes, failed])
    want = trainer.make_batch(episodes)
    np.testing.assert_array_equal(with_failed.turn_advantages, want.turn_advantages)
    assert torch.equal(with_failed.advantages, want.advantages)
    metrics = trainer.train_step([*episodes, failed])
    assert metrics["infra_error_episodes"] == 1.0
    assert metrics["infra_error_episodes/sub_env_crash"] == 1.0


def test_advantage_kwargs_reach_the_estimator(episodes):
    cfg = config(algorithm="grpo", advantage_kwargs={"std": "population", "eps": 0.0})
    batch = Trainer(random_byte_lm.tiny_model(seed=0), cfg).make_batch(episodes)
    r, m = turn_rewards(episodes)
    want = grpo(episode_scores(r, m), ["a", "a", "b", "b"], std="population", eps=0.0)
    np.testing.assert_array_equal(batch.turn_advantages[:, 0], want)


def ppo_trainer(cfg: TrainerConfig) -> Trainer:
    """A PPO trainer whose value head is not zero, so GAE sees real values."""
    trainer = Trainer(random_byte_lm.tiny_model(seed=0), cfg)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        weight = trainer.value_head.weight
        weight.copy_(torch.randn(weight.shape, generator=generator))
        trainer.value_head.bias.fill_(0.1)
    return trainer


@pytest.mark.parametrize("bootstrap", [False, True])
def test_ppo_advantages_are_turn_gae_of_the_value_head(episodes, bootstrap):
    cfg = config(algorithm="ppo", gamma=0.9, lam=0.8, bootstrap_truncated=bootstrap)
    trainer = ppo_trainer(cfg)
    batch = trainer.make_batch(episodes)
    r, m = turn_rewards(episodes)
    values = batch.turn_values
    assert (values[m] != 0).all()
    assert (values[~m] == 0).all()
    # V_t is read at the token before the turn's first policy token.
    rows = batch.rows
    with torch.no_grad():
        out = trainer.model(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            output_hidden_states=True,
        )
        heads = trainer.value_head(out.hidden_states[-1]).squeeze(-1).numpy()
    last_values = np.zeros(len(episodes))
    for b in range(len(rows)):
        policy = np.flatnonzero(rows.response_mask[b])
        for t in np.unique(rows.turn_index[b][policy]):
            first = int(np.flatnonzero(rows.turn_index[b] == t)[0])
            assert values[rows.episode_index[b], t] == pytest.approx(heads[b, first - 1], abs=1e-6)
        last_values[rows.episode_index[b]] = heads[b, int(rows.attention_mask[b].sum()) - 1]
    if bootstrap:
        terminated = episode_terminated(episodes)
        want, returns = turn_gae(
            r, values, m, gamma=0.9, lam=0.8, last_values=last_values, terminated=terminated
        )
    else:
        want, returns = turn_gae(r, values, m, gamma=0.9, lam=0.8)
    np.testing.assert_allclose(batch.turn_advantages, want, atol=1e-6)
    np.testing.assert_allclose(batch.turn_returns, returns, atol=1e-6)
    # Value targets sit at the read positions, one per turn.
    assert int(batch.value_mask.sum()) == int(m.sum())
    np.testing.assert_allclose(
        np.sort(batch.returns[batch.value_mask].numpy()), np.sort(returns[m]), atol=1e-6
    )


def test_both_layouts_score_the_same_tokens_in_the_same_context(episodes):
    batches = {
        layout: ppo_trainer(config(algorithm="ppo", layout=layout)).make_batch(episodes)
        for layout in ("per_episode", "per_turn")
    }

    def per_turn_logprobs(batch):
        rows, out = batch.rows, {}
        for b in range(len(rows)):
            for t in np.unique(rows.turn_index[b][rows.turn_index[b] >= 0]):
                at = rows.turn_index[b] == t
                out[(int(rows.episode_index[b]), int(t))] = batch.old_logprobs[b][at].numpy()
        return out

    a, b = (per_turn_logprobs(batches[k]) for k in ("per_episode", "per_turn"))
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_allclose(a[key], b[key], atol=1e-5)
    np.testing.assert_allclose(
        batches["per_episode"].turn_values, batches["per_turn"].turn_values, atol=1e-5
    )


def test_loss_mask_is_exactly_the_policy_tokens(episodes):
    batch = Trainer(random_byte_lm.tiny_model(seed=0), config()).make_batch(episodes)
    rows = batch.rows
    assert torch.equal(batch.loss_mask, torch.as_tensor(rows.turn_index >= 0))
    assert int(batch.loss_mask.sum()) == sum(len(t.response_ids) for e in episodes for t in e.turns)
    for b, episode in enumerate(episodes):  # per_episode: one row per episode
        ids = batch.input_ids[b][batch.loss_mask[b]].tolist()
        assert ids == [i for t in episode.turns for i in t.response_ids]


@pytest.mark.parametrize("algorithm", ["rebn", "ppo"])
def test_only_policy_tokens_get_gradient(episodes, algorithm):
    cfg = config(algorithm=algorithm, kl_coef=0.1, ent_coef=0.01)
    trainer = Trainer(random_byte_lm.tiny_model(seed=0), cfg) if algorithm == "rebn" else None
    trainer = trainer or ppo_trainer(cfg)
    captured = []

    def keep_logits(module, inputs, output):
        if output.requires_grad:
            output.retain_grad()
            captured.append(output)

    trainer.model.lm_head.register_forward_hook(keep_logits)
    batch = trainer.make_batch(episodes)
    trainer.update(batch)
    (logits,) = captured
    grad = logits.grad.abs().sum(-1)  # [B, L]: logits at j - 1 score token j
    scored = torch.nn.functional.pad(batch.loss_mask, (0, 1))[:, 1:]  # predicts a policy token
    assert (grad[~scored] == 0).all()
    assert (grad[scored] > 0).all()
    env_tokens = (batch.attention_mask == 1) & ~batch.loss_mask
    env_tokens[:, : int(batch.rows.prompt_length.max())] = False  # tokens between turns
    assert env_tokens.any()


@pytest.mark.parametrize(
    ("overrides", "passes"),
    [
        ({"old_logprobs": "detach"}, 1),  # the update's own forward only
        ({"old_logprobs": "recompute"}, 2),  # log pi_old first, then the update
        ({"old_logprobs": "detach", "algorithm": "ppo"}, 2),  # V_old needs the first pass
    ],
)
def test_detach_skips_the_no_grad_pass_unless_values_need_it(episodes, overrides, passes):
    cfg = config(**overrides)
    trainer = ppo_trainer(cfg) if cfg.algorithm == "ppo" else None
    trainer = trainer or Trainer(random_byte_lm.tiny_model(seed=0), cfg)
    forwards = []
    trainer.model.register_forward_hook(lambda module, inputs, output: forwards.append(1))
    metrics = trainer.train_step(episodes)
    assert len(forwards) == passes
    assert np.isfinite(metrics["loss"])


def test_episodes_without_policy_tokens_are_dropped(tokenizer, episodes, caplog):
    skipped = Episode(
        "toy",
        group_id="c",
        turns=[Turn("x" * 50, "", 0.0, truncated=True, prompt_ids=[1], response_ids=[])],
    )
    trainer = Trainer(random_byte_lm.tiny_model(seed=0), config(algorithm="rebn"))
    batch = trainer.make_batch([*episodes, skipped])
    assert len(batch.episodes) == len(episodes)
    assert "dropped 1 of 5 episodes" in caplog.text


def test_rollout_old_logprobs_need_sampler_logprobs(episodes):
    bare = [
        Episode(
            e.env_id,
            e.seed,
            e.group_id,
            [Turn(**{**t.__dict__, "response_logprobs": None}) for t in e.turns],
        )
        for e in episodes
    ]
    trainer = Trainer(random_byte_lm.tiny_model(seed=0), config(old_logprobs="rollout"))
    with pytest.raises(ValueError, match="response_logprobs"):
        trainer.make_batch(bare)


def test_truncated_importance_sampling_weighs_each_token_by_the_capped_ratio(episodes):
    """``tis_cap``: each policy token's loss times min(exp(log pi_old - log pi_sampler), cap)."""
    trainer = Trainer(random_byte_lm.tiny_model(seed=0), config(tis_cap=2.0))
    batch = trainer.make_batch(episodes)
    mask = batch.loss_mask
    sampler = torch.as_tensor(batch.rows.rollout_logprobs)
    expected = torch.exp(batch.old_logprobs - sampler).clamp(max=2.0)
    assert batch.tis_weights is not None
    torch.testing.assert_close(batch.tis_weights[mask], expected[mask])
    assert not batch.tis_weights[~mask].any()
    assert (batch.tis_weights[mask] <= 2.0).all()

    def first_loss(**overrides) -> float:
        model = random_byte_lm.tiny_model(seed=0)
        return Trainer(model, config(algorithm="rebn", **overrides)).train_step(episodes)["loss"]

    plain, tiny = first_loss(), first_loss(tis_cap=1e-6)  # every weight capped at 1e-6
    assert abs(plain) > 1e-4
    assert abs(tiny) <= 1e-6 * abs(plain) * 10


# -- configuration ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"algorithm": "grpo2"}, "did you mean 'grpo'"),
        ({"layout": "episode"}, "unknown layout"),
        ({"loss_agg_mode": "seq-mean"}, "unknown loss_agg_mode"),
        ({"kl_estimator": "k4"}, "unknown kl_estimator"),
        ({"gamma": 1.5}, "gamma must be in"),
        ({"temperature": 0.0}, "temperature must be"),
        ({"lr": -1.0}, "lr must be"),
        ({"tis_cap": 0.0}, "tis_cap must be finite and > 0"),
        ({"tis_cap": 2.0, "old_logprobs": "rollout"}, "needs old_logprobs='recompute'"),
        ({"ppo_epochs": 0}, "ppo_epochs must be"),
        ({"dual_clip_c": 0.5}, "dual_clip_c must be > 1"),
        ({"num_episodes": 5, "group_size": 2}, "multiple of group_size"),
        ({"algorithm": "grpo", "group_size": 1, "num_episodes": 4}, "group_size >= 2"),
        ({"algorithm": "ppo", "advantage_kwargs": {"std": "unbiased"}}, "takes none"),
        ({"old_logprobs": "detach", "ppo_epochs": 2}, "ppo_epochs=1"),
    ],
)
def test_config_refuses_bad_values_with_a_clear_message(overrides, message):
    with pytest.raises(ValueError, match=message):
        config(**overrides)


def test_importing_xpgym_does_not_import_torch():
    code = (
        "import sys, xpgym, xpgym.training.advantages, xpgym.core.trajectory\n"
        "assert 'torch' not in sys.modules and 'xpgym.adapters.torch' not in sys.modules\n"
        "assert 'xpgym.reference.trainer' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- end to end ---------------------------------------------------------------------------


def run(algorithm: str, *, steps: int, group_size: int = 1, **overrides):
    """`steps` training steps on GuessTheNumber-easy; returns (weights, metrics, batches)."""
    tokenizer = random_byte_lm.tiny_tokenizer()
    model = random_byte_lm.tiny_model(seed=0)
    cfg = config(
        algorithm=algorithm,
        group_size=group_size,
        max_new_tokens=6,
        max_turns=2,
        seed=5,
        **overrides,
    )
    vec = xpgym.make_vec(EASY, 2, wrappers=[ByteSumBonus])
    with vec:
        policy = HFPolicy(
            model, tokenizer, max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature
        )
        collector = RolloutCollector(vec, policy, max_turns=cfg.max_turns)
        trainer = Trainer(model, cfg, pad_token_id=policy.pad_token_id)
        history, batches = [], []
        for step in range(steps):
            episodes = collector.collect(cfg.num_episodes, group_size=group_size, seed=step)
            batches.append(trainer.make_batch(episodes))
            history.append(trainer.update(batches[-1]))
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return weights, history, batches


@pytest.mark.parametrize(
    ("algorithm", "group_size", "steps", "overrides"),
    [
        ("rebn", 1, 2, {}),
        ("grpo", 2, 2, {"kl_coef": 0.05}),
        ("ppo", 1, 1, {"ppo_epochs": 2, "num_minibatches": 2}),
    ],
)
def test_training_on_guess_the_number_is_finite_and_deterministic(
    algorithm, group_size, steps, overrides
):
    first, history, batches = run(algorithm, steps=steps, group_size=group_size, **overrides)
    second, again, _ = run(algorithm, steps=steps, group_size=group_size, **overrides)
    initial = random_byte_lm.tiny_model(seed=0).state_dict()

    assert history == again
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert any(not torch.equal(first[k], initial[k]) for k in first)
    for metrics in history:
        assert all(math.isfinite(v) for v in metrics.values()), metrics
        assert metrics["grad_norm"] > 0
    for batch in batches:
        rows = batch.rows
        assert torch.equal(batch.loss_mask, torch.as_tensor(rows.turn_index >= 0))
        sampled = sum(len(t.response_ids) for e in batch.episodes for t in e.turns)
        assert int(batch.loss_mask.sum()) == sampled
        assert (batch.advantages[batch.loss_mask] != 0).any()
        assert (batch.advantages[~batch.loss_mask] == 0).all()
        # The learner's log pi_old is the sampler's log-prob (same temperature, same weights
        # before the first update of the step).
        sampler = torch.as_tensor(rows.rollout_logprobs)[batch.loss_mask]
        torch.testing.assert_close(batch.old_logprobs[batch.loss_mask], sampler, atol=2e-4, rtol=0)


def test_train_runs_the_collect_and_update_loop(caplog):
    caplog.set_level("INFO", logger="xpgym.reference.trainer")
    tokenizer = random_byte_lm.tiny_tokenizer()
    model = random_byte_lm.tiny_model(seed=0)
    cfg = config(algorithm="grpo", max_new_tokens=4, max_turns=1, temperature=0.8)
    with xpgym.make_vec(EASY, 2, wrappers=[ByteSumBonus]) as vec:
        history = train(model, tokenizer, vec, cfg, num_steps=2)
    assert len(history) == 2
    assert all(h["num_episodes"] == 4 and h["response_length"] <= 4 for h in history)
    assert "step 1: return" in caplog.text


def test_reward_function_metrics_reach_train_step_metrics():
    trainer = Trainer(random_byte_lm.tiny_model(seed=0), config(algorithm="rebn"))
    metrics = trainer.train_step(with_reward_metrics())
    assert REWARD_METRICS.items() <= metrics.items()
