"""What the env families share; no family imports another, they all import from here.

* `answers`: the final answer of a reply (``<answer>`` block, last ``\\boxed{}``).
* `answer_env`: `BoxedAnswerEnv`, one question per episode answered in ``\\boxed{}``, and
  `GradeResult`, what grading one reply gives.
* `datasets`: the loader of dataset-backed envs (local files or the hub) and `pick_index`.
* `arguments`: `is_int`, `is_number`, the type tests of numeric constructor arguments and
  options (numpy integers count, bools do not).
* `presets`: difficulty presets (`resolve_presets`, `override_preset`) and `PresetEnv`,
  the base of the games whose settings come from a preset.
"""
