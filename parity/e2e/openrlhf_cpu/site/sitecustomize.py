"""Test harness (not a way to train): on the ``PYTHONPATH`` of a `parity.e2e.openrlhf_cpu` run
only, so that Python imports it at start-up in every process of the run, vLLM's engine-core
and worker processes included, and installs the harness's import hook
(`parity.e2e.openrlhf_cpu.imports`)."""

from parity.e2e.openrlhf_cpu import imports

imports.install()
