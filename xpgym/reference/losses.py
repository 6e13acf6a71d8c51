r"""The reference trainer's per-token quantities and losses, and how a loss is aggregated.

Every function takes and returns ``[B, L]`` tensors aligned with ``input_ids``: entry
``[b, j]`` describes token ``j`` of row ``b``. Rows are right-padded; the mask (``1`` on
policy tokens only) says which entries count. `xpgym.reference.trainer` combines them into
the loss it minimises.

The shift
---------
A causal LM's logits at position ``j - 1`` are the distribution of token ``j``. With ``z``
the logits and ``tau`` the temperature (the learner applies the sampling temperature to the
logits, as all five trainers do)::

    logp[b, j] = log_softmax(z[b, j - 1] / tau)[input_ids[b, j]]     for j >= 1
    logp[b, 0] = 0                                                    (nothing predicts it)

so ``logp`` lines up with ``input_ids`` and the mask (`logprobs_from_logits`,
`token_logprobs`, `entropy_from_logits`). The first token of every row is a prompt token,
never a policy token.

Per token, then aggregated
--------------------------
For every token ``t``::

    r_t  = exp(log pi_theta(x_t) - log pi_old(x_t))                     importance ratio
    l_t  = max(-A_t * r_t, -A_t * clip(r_t, 1 - eps_low, 1 + eps_high))  PPO-clip
    l_t  = min(l_t, -A_t * c)   where A_t < 0                            dual clip (if c set)
    k_t  = KL estimator of pi_theta vs pi_ref at x_t                     k1, k2, k3
    H_t  = entropy of softmax(z_{t-1} / tau)

(`policy_loss`, `kl_penalty`, `entropy_from_logits`), each reduced to a scalar by
`aggregate_loss` (token-mean, seq-mean-token-mean, seq-mean-token-sum,
seq-mean-token-sum-norm), and PPO's clipped value loss over one entry per turn
(`value_loss`). Importing this module imports torch.
"""

from __future__ import annotations

from typing import Literal, get_args

import torch
import torch.nn.functional as F  # noqa: N812 (the usual name)

from xpgym.reference._checks import check_choice

__all__ = [
    "KL_ESTIMATORS",
    "LOSS_AGG_MODES",
    "KLEstimator",
    "LossAggMode",
    "aggregate_loss",
    "entropy_from_logits",
    "kl_penalty",
    "logprobs_from_logits",
    "policy_loss",
    "token_logprobs",
    "value_loss",
]

LossAggMode = Literal[
    "token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"
]
KLEstimator = Literal["k1", "k2", "k3"]

LOSS_AGG_MODES: tuple[LossAggMode, ...] = get_args(LossAggMode)
KL_ESTIMATORS: tuple[KLEstimator, ...] = get_args(KLEstimator)


# --------------------------------------------------------------------------------------
# Log-probabilities, entropy
# --------------------------------------------------------------------------------------


def logprobs_from_logits(
    logits: torch.Tensor, input_ids: torch.Tensor, *, temperature: float = 1.0
) -> torch.Tensor:
    """Log-probability of each token under the logits of the position before it.

    ``out[b, j] = log_softmax(logits[b, j - 1] / temperature)[input_ids[b, j]]`` for
    ``j >= 1`` and ``out[b, 0] = 0`` (the shift; module docstring). Computed in float32.

    Args:
        logits: ``[B, L, V]`` causal-LM logits (position ``j`` predicts token ``j + 1``).
        input_ids: ``[B, L]`` int64, the tokens whose log-probs are wanted.
        temperature: Divides the logits (> 0); must equal the sampling temperature.

    Returns:
        ``[B, L]`` float32, aligned with `input_ids`. Values at padding are meaningless;
        mask them.
    """
    logp = torch.log_softmax(logits[:, :-1].float() / temperature, dim=-1)  # [B, L-1, V]
    picked = logp.gather(-1, input_ids[:, 1:, None]).squeeze(-1)  # [B, L-1]
    return F.pad(picked, (1, 0))  # [B, L]: nothing predicts token 0


def entropy_from_logits(logits: torch.Tensor, *, temperature: float = 1.0) -> torch.Tensor:
    """Entropy of the distribution each token was drawn from, aligned like the log-probs.

    ``out[b, j] = H(softmax(logits[b, j - 1] / temperature))
    = -sum_v p_v * log p_v`` for ``j >= 1``, ``out[b, 0] = 0``; float32, in nats.

    Args:
        logits: ``[B, L, V]``.
        temperature: As in `logprobs_from_logits`.

    Returns:
        ``[B, L]`` float32.
    """
    logp = torch.log_softmax(logits[:, :-1].float() / temperature, dim=-1)
    entropy = -(logp.exp() * logp).sum(-1)  # [B, L-1]
    return F.pad(entropy, (1, 0))


def token_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    position_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-token log-probs of a right-padded batch under a causal LM (one forward pass).

    Args:
        model: A transformers causal LM (returns ``.logits``).
        input_ids: ``[B, L]`` int64, each row's tokens then padding (right padding).
        attention_mask: ``[B, L]``, 1 on real tokens, 0 on padding.
        temperature: Divides the logits (> 0).
        position_ids: ``[B, L]`` (default: the model's, ``0, 1, ...`` per row, which is
            right for right padding).

    Returns:
        ``[B, L]`` float32: `logprobs_from_logits` of the model's logits; ``out[:, 0] = 0``.
        Gradients flow unless called under ``torch.no_grad()``.
    """
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        use_cache=False,
    )
    return logprobs_from_logits(out.logits, input_ids, temperature=temperature)


# --------------------------------------------------------------------------------------
# Losses
# --------------------------------------------------------------------------------------


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps_low: float = 0.2,
    clip_eps_high: float = 0.2,
    dual_clip_c: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token PPO-clip loss (to minimise), before aggregation.

    ::

        r_t = exp(logprobs_t - old_logprobs_t)
        l_t = max(-A_t * r_t, -A_t * clip(r_t, 1 - clip_eps_low, 1 + clip_eps_high))
            = -min(r_t * A_t, clip(r_t, ...) * A_t)
        l_t = min(l_t, -A_t * dual_clip_c)   where A_t < 0  (only when dual_clip_c is set)

    ``l_t = 0`` where `mask` is 0 (the log-ratio is zeroed there first, so no overflow or
    NaN can leak into the gradient). Where the clipped branch is the larger one, ``l_t`` is
    constant in ``logprobs``: e.g. ``A > 0, r > 1 + eps_high`` or ``A < 0, r < 1 - eps_low``
    have zero gradient. With ``old_logprobs = logprobs.detach()``, ``r = 1`` and
    ``grad l_t = -A_t * grad logprobs_t`` (REINFORCE).

    Args:
        logprobs: ``[B, L]`` log pi_theta of the tokens (with gradient).
        old_logprobs: ``[B, L]`` log pi_old (no gradient).
        advantages: ``[B, L]`` per-token advantages.
        mask: ``[B, L]`` bool or 0/1, 1 on policy tokens.
        clip_eps_low, clip_eps_high: Clip range ``[1 - low, 1 + high]`` of the ratio.
        dual_clip_c: Dual-clip bound for ``A < 0`` (``> 1``), or None.

    Returns:
        ``(loss [B, L], clipped [B, L] bool)``: `clipped` marks policy tokens where the
        clipped term is strictly larger than the unclipped one (verl's ``pg_clipfrac``).
    """
    mask = mask.bool()
    log_ratio = torch.where(mask, logprobs - old_logprobs, 0.0)
    ratio = torch.exp(log_ratio)  # r_t = pi_theta / pi_old
    unclipped = -advantages * ratio  # -A r
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_eps_low, 1.0 + clip_eps_high)
    loss = torch.maximum(unclipped, clipped)  # -min(A r, A clip(r))
    if dual_clip_c is not None:
        loss = torch.where(advantages < 0, torch.minimum(loss, -advantages * dual_clip_c), loss)
    loss = torch.where(mask, loss, 0.0)
    return loss, (clipped > unclipped) & mask


def kl_penalty(
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    estimator: KLEstimator = "k3",
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-token estimate of ``KL(pi_theta || pi_ref)`` from the sampled tokens (Schulman).

    With ``d = ref_logprobs - logprobs = log(pi_ref / pi_theta)`` at the sampled token::

        k1 = -d                     = log pi_theta - log pi_ref   (unbiased; can be < 0)
        k2 = d**2 / 2                                              (verl "mse")
        k3 = exp(d) - d - 1                                        (unbiased, >= 0; verl
                                                                    "low_var_kl", Oat)

    No clamping (verl clamps ``k3`` to [-10, 10]; equal unless the policies are far apart).
    As a loss term, ``k1``'s expected gradient is 0; use ``k3`` (the default) for a KL loss.

    Args:
        logprobs: ``[B, L]`` log pi_theta (with gradient).
        ref_logprobs: ``[B, L]`` log pi_ref of the same tokens.
        estimator: ``"k1"``, ``"k2"`` or ``"k3"``.
        mask: ``[B, L]``, optional: ``d`` is set to 0 (so ``k = 0``) where it is 0.

    Returns:
        ``[B, L]`` float.
    """
    check_choice("kl_estimator", estimator, KL_ESTIMATORS)
    d = ref_logprobs - logprobs
    if mask is not None:
        d = torch.where(mask.bool(), d, 0.0)
    if estimator == "k1":
        return -d
    if estimator == "k2":
        return 0.5 * d * d
    return torch.exp(d) - d - 1.0


def aggregate_loss(
    loss_mat: torch.Tensor,
    mask: torch.Tensor,
    mode: LossAggMode,
    *,
    loss_scale_factor: float | None = None,
) -> torch.Tensor:
    """Reduce a per-token loss ``[B, L]`` to a scalar, as verl's ``agg_loss`` does.

    With ``m`` the mask, ``n_b = sum_t m[b, t]`` the loss tokens of row ``b`` and ``B'`` the
    number of rows with ``n_b > 0`` (a row without loss tokens is not counted)::

        token-mean:              sum_{b,t} m l / sum_{b,t} m
        seq-mean-token-mean:     1/B' * sum_b (sum_t m l / n_b)
        seq-mean-token-sum:      1/B' * sum_b  sum_t m l
        seq-mean-token-sum-norm: 1/B' * sum_b (sum_t m l / C)

    ``C`` = `loss_scale_factor`, or ``L = mask.shape[-1]`` when None (verl's default for its
    response-only ``[B, R]`` mask; pass a constant such as the generation budget when the
    rows hold prompts too, so the loss scale does not vary with the batch). An empty mask
    gives 0. Known differences from verl's code: it adds 1e-8 to the token counts (a
    relative change below 1e-8); its seq modes divide by all ``B`` rows, empty ones too
    (the same here unless a row has no policy token, which `turn_rows` and `episode_rows`
    never produce); older verl releases computed ``seq-mean-token-sum-norm`` as
    ``sum_b (sum_t m l) / C``, without the ``1/B``.

    Args:
        loss_mat: ``[B, L]`` per-token loss.
        mask: ``[B, L]`` bool or 0/1; entries off the mask are ignored (even NaN).
        mode: One of the four modes above.
        loss_scale_factor: ``C`` for ``"seq-mean-token-sum-norm"`` (> 0).

    Returns:
        A scalar tensor.
    """
    check_choice("loss_agg_mode", mode, LOSS_AGG_MODES)
    mask = mask.bool()
    masked = torch.where(mask, loss_mat, 0.0)
    if mode == "token-mean":
        return masked.sum() / mask.sum().clamp(min=1)
    tokens = mask.sum(-1)  # n_b
    if mode == "seq-mean-token-mean":
        per_row = masked.sum(-1) / tokens.clamp(min=1)
    elif mode == "seq-mean-token-sum":
        per_row = masked.sum(-1)
    else:
        scale = mask.shape[-1] if loss_scale_factor is None else loss_scale_factor
        if not scale > 0:
            raise ValueError(f"loss_scale_factor must be > 0, got {scale!r}")
        per_row = masked.sum(-1) / scale
    return per_row.sum() / (tokens > 0).sum().clamp(min=1)


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float | None = 0.2,
) -> torch.Tensor:
    """PPO's clipped value loss, averaged over the entries of `mask` (one per turn).

    ::

        L_V = 1/2 * mean_mask max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2)

    and ``1/2 * mean_mask (V - R)^2`` when `clip_eps` is None (CleanRL's form).

    Args:
        values: ``[B, L]`` current value estimates (with gradient).
        old_values: ``[B, L]`` values before the update.
        returns: ``[B, L]`` targets ``R = A + V_old``.
        mask: ``[B, L]``, 1 where a turn's value is read.
        clip_eps: ``eps`` above, or None.

    Returns:
        A scalar tensor (0 for an empty mask).
    """
    mask = mask.bool()
    loss = (values - returns) ** 2
    if clip_eps is not None:
        clipped = old_values + torch.clamp(values - old_values, -clip_eps, clip_eps)
        loss = torch.maximum(loss, (clipped - returns) ** 2)
    return 0.5 * torch.where(mask, loss, 0.0).sum() / mask.sum().clamp(min=1)
