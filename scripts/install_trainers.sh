#!/usr/bin/env bash
# Install the RL trainers xpgym's adapter tests import, CPU only, into an existing venv.
#
#   bash scripts/install_trainers.sh [VENV_DIR]      (default: .venv; run scripts/setup.sh first)
#
# The trainers' own requirements pull CUDA-only packages (flash-attn, vllm, deepspeed) or pin
# other versions of transformers, so each is installed with --no-deps and the few packages its
# data classes, advantage code and hooks import are added by hand. torch stays the CPU build.
# Oat's wheels declare Python < 3.11; its modules used here run on 3.10-3.12. ROLL is not on
# PyPI: its tests use the GEM 0.0.4 registry it pins. See docs/trainers.md.
set -euo pipefail
cd "$(dirname "$0")/.."
pip=("${1:-.venv}/bin/python" -m pip install --quiet)

"${pip[@]}" --no-deps verl==0.9.1
"${pip[@]}" tensordict==0.10.0 omegaconf==2.3.1 hydra-core==1.3.8 codetiming==1.4.0 \
  cachetools torchdata==0.11.0 peft==0.21.2 fastapi==0.165.0
"${pip[@]}" --no-deps openrlhf==0.11.2
"${pip[@]}" pylatexenc==2.10 aiohttp
"${pip[@]}" --no-deps rl-square==0.0.2
"${pip[@]}" --no-deps --ignore-requires-python oat-llm==0.2.4
"${pip[@]}" --no-deps gem-llm==0.0.4
"${1:-.venv}/bin/python" -c "import torch; assert torch.__version__.endswith('+cpu'), torch.__version__"
echo "trainers installed (verl, openrlhf, rl-square, oat-llm, gem-llm)"
