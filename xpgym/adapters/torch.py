"""Deprecated path of the reference trainer: it moved to `xpgym.reference`.

`xpgym.reference.trainer` holds `TrainerConfig`, `Trainer`, `Batch` and `train`;
`xpgym.reference.losses` the per-token losses and their aggregation. Every name this module
used to export still resolves here, from its new home, with a `DeprecationWarning` naming
that home. This path will be removed.
"""

from xpgym.core.deprecation import moved_names

__getattr__ = moved_names(
    __name__,
    {
        **dict.fromkeys(
            ["AdvantageFn", "Batch", "Trainer", "TrainerConfig", "train"],
            "xpgym.reference.trainer",
        ),
        **dict.fromkeys(
            [
                "aggregate_loss",
                "entropy_from_logits",
                "kl_penalty",
                "logprobs_from_logits",
                "policy_loss",
                "token_logprobs",
                "value_loss",
            ],
            "xpgym.reference.losses",
        ),
    },
)
