#!/usr/bin/env bash
# Set up a development environment for xpgym from the package registries.
#
#   bash scripts/setup.sh [VENV_DIR]      (default: .venv)
#
# Installs bubblewrap (the sandbox for model-written code) with apt-get when it is missing,
# creates the virtual environment, installs the CPU build of torch first (so nothing pulls
# a CUDA build), then xpgym in editable mode with the extras its tests use (dev, tools, mcp, remote, ray).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv}"

if ! command -v bwrap >/dev/null 2>&1; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq bubblewrap
fi

python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet torch==2.13.0
"$venv/bin/python" -m pip install --quiet -e ".[dev,envs,vision,eval,tools,mcp,remote,ray]"
echo "xpgym is installed in $venv; activate it with: . $venv/bin/activate"
