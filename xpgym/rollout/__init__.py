"""The rollout loop: envs and policies in, token-exact `Episode` records out.

* `recorder`: the one episode loop (turns -> `Turn`/`Episode`, limits, truncation reasons);
* `collector`: `RolloutCollector`, a vector env (autoreset off) + a policy -> episodes;
* `runner`: one episode inside a trainer's async rollout (uses the recorder);
* `env_pool`: envs leased to trainers' hooks, and `make_trainer_env`;
* `policies`: Hugging Face (cross-turn KV cache), vLLM, OpenAI-compatible backends.

`xpgym.rollout` imports `xpgym.core` only (and `xpgym.training` never imports it).
"""
