"""The GPU parity run's jobs: for each trainer, the Python it runs on and the pinned stack it
installs. `JOBS` is the one table: ``.github/workflows/parity-gpu.yml`` installs each train
job with ``python -m parity.curves.gpu_jobs install --trainer X`` (the commands of
`install_commands`) and its matrix names each trainer's Python, which
``tests/parity/test_parity_gpu_jobs.py`` checks against `JOBS`. Every job is resolved
(`resolve`) for that Python on the runner's platform (`RUNNER_PLATFORMS`) while the test
environment is installed, when the package registries are reachable: ``scripts/setup.sh``
runs ``resolve --all --report <venv>/xpgym-gpu-jobs.json`` (`resolve_all`), and the test
fails when a job did not resolve, when the deliberately broken `CONTROL` job did, or when
`JOBS` changed since (`fingerprint`).

    python -m parity.curves.gpu_jobs install --trainer oat [--dry-run]
    python -m parity.curves.gpu_jobs resolve --trainer oat [--python 3.11]
    python -m parity.curves.gpu_jobs resolve --all --report resolved.json

A job installs in this order (`install_commands`), so that the packages built from source
find the torch they compile against: the checkout (ROLL), torch, the build tools
(`BUILD_TOOLS`), the source-built packages
(`GpuJob.built`, ``--no-build-isolation --no-deps``: their own requirements are resolved
with the rest in the next command, which sees them installed), then xpgym (editable) with
the pinned requirements (and the checkout's requirements file).

`resolve` is what CI can prove without a GPU runner, from the package registries alone:

1. every top requirement (`GpuJob.requirements`, `GpuJob.expand`) has a wheel for the job's
   Python on `RUNNER_PLATFORMS` (``pip install --dry-run --no-deps --only-binary=:all:
   --python-version X --platform ...``, metadata read by HTTP range requests:
   ``--use-feature=fast-deps``; without it pip downloads every wheel whole, torch alone
   0.5-0.9 GB);
2. their declared requirements (markers evaluated for that Python on Linux x86-64, with the
   extras asked for), less the source-built packages, resolve together to wheels only, under
   a constraints file of the job's pins (``===``: a machine's local ``+cpu`` torch is not the
   runner's): the runner's install cannot hit a version conflict or a missing wheel there;
3. each source-built package is published at its pinned version (``pip index versions``).

What it does not prove: that the source builds succeed (they need the runner's CUDA), the
declared requirements of the source-built packages, and, for ROLL, the requirements file of
its git checkout (cloning it is not a package registry).
Importing this module needs only the standard library (the workflow runs it on a bare
Python); `resolve` imports ``packaging`` (pip's own dependency, in every venv with pip).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = [
    "BUILD_TOOLS",
    "JOBS",
    "RUNNER_PLATFORMS",
    "Checkout",
    "GpuJob",
    "Resolution",
    "install_commands",
    "main",
    "resolve",
]

logger = logging.getLogger(__name__)

RUNNER_GLIBC = (2, 35)
"""The GPU runner's glibc (Ubuntu 22.04; docs/parity.md, "Setting up a runner")."""

RUNNER_PLATFORMS: tuple[str, ...] = (
    *(f"manylinux_2_{minor}_x86_64" for minor in range(RUNNER_GLIBC[1], 4, -1)),
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
)
"""The wheel platform tags the runner installs (Linux x86-64, glibc `RUNNER_GLIBC` and older);
every tag is passed to pip (``--platform``), so a wheel only for newer glibc or another
machine does not count."""


@dataclass(frozen=True)
class Checkout:
    """A trainer installed from a git checkout at a fixed commit (not on a package registry).

    Attributes:
        url: The repository.
        commit: The full commit id the job checks out.
        directory: Where the job puts it (relative to the repository root; on ``PYTHONPATH``
            for the run).
        requirements: The checkout's requirements file the job installs (relative to it).
    """

    url: str
    commit: str
    directory: str
    requirements: str


@dataclass(frozen=True)
class GpuJob:
    """One trainer's job: its Python and its pinned stack.

    Attributes:
        python: The ``X.Y`` Python the job's venv runs (the trainer installs there).
        requirements: Pinned requirements installed with their dependencies (resolved by
            pip together with xpgym's own).
        built: Pinned packages published only as source (sdists), built on the runner
            against the installed torch (``--no-build-isolation``); left out of step 2 of
            `resolve` and checked as published.
        expand: Pinned dependencies of the requirements under which a source-built package
            hangs: `resolve` checks their wheels and resolves their declared requirements
            in their place (pip cannot leave out a dependency deeper than the first level).
            Not installed by name: the requirements pull them.
        checkout: The trainer's git checkout, where it is not on a package registry.
        why: Why this Python and any special install.
    """

    python: str
    requirements: tuple[str, ...]
    built: tuple[str, ...] = ()
    expand: tuple[str, ...] = ()
    checkout: Checkout | None = None
    why: str = ""

    def torch_pin(self) -> str:
        """The job's ``torch==...`` requirement (installed first; the source builds need it).

        Raises:
            ValueError: the job pins no torch.
        """
        for requirement in self.requirements:
            if _name(requirement) == "torch":
                return requirement
        raise ValueError(f"the job pins no torch: {self.requirements}")


ENV_PACKAGES = ("reasoning-gym==0.1.25",)
"""What the GPU envs need beyond xpgym's own dependencies (``rg:leg_counting-v0``; the same
pin as xpgym's ``envs`` extra, whose math-verify antlr pin conflicts with Oat's and ROLL's and
is not needed by the two envs)."""

ENV_BUILT = ("cellpylib==2.4.0", "pycosat==0.6.6", "zss==1.2.0")
"""reasoning-gym 0.1.25's pins published as sdists only (pycosat is C: the runner needs a
compiler, which GitHub's runner images have)."""

BUILD_TOOLS = ("setuptools>=70.1", "wheel", "packaging", "ninja", "psutil")
"""What the source builds import from the venv (``--no-build-isolation``): setuptools with its
own ``bdist_wheel``, and flash-attn's and DeepSpeed's setup-time imports."""

ROLL_COMMIT = "8eb27cc2dc34c4d1310b169d9b86d339004d811a"
"""The alibaba/ROLL commit the CPU tests were run against (docs/parity.md, layer 3)."""

JOBS: dict[str, GpuJob] = {
    "verl": GpuJob(
        python="3.11",
        requirements=("torch==2.11.0", "verl[vllm]==0.9.1", *ENV_PACKAGES),
        built=ENV_BUILT,
        why="verl 0.9.1's vllm extra pins torch 2.11.0, vllm 0.24.0 and transformers 5.9.0",
    ),
    "openrlhf": GpuJob(
        python="3.11",
        requirements=("torch==2.13.0", "openrlhf[vllm]==0.11.2", *ENV_PACKAGES),
        built=(
            "deepspeed==0.19.6",
            "flash-attn==2.8.3",
            "transformers-stream-generator==0.0.5",
            *ENV_BUILT,
        ),
        why="OpenRLHF 0.11.2 pins deepspeed 0.19.6 and flash-attn 2.8.3 (sdists only); its "
        "vllm extra pins vllm 0.29.0, which pins torch 2.13.0",
    ),
    "oat": GpuJob(
        python="3.10",
        requirements=("torch==2.6.0", "oat-llm==0.2.4", *ENV_PACKAGES),
        built=(
            "deepspeed==0.16.8",
            "flash-attn==2.7.4.post1",
            "transformers-stream-generator==0.0.5",
            "pylatexenc==2.10",
            *ENV_BUILT,
        ),
        why="oat-llm 0.2.4 requires Python < 3.11 and dm-launchpad has cp38-cp310 wheels only; "
        "it pins vllm 0.8.4 (torch 2.6.0), deepspeed 0.16.8 and flash-attn 2.7.4.post1",
    ),
    "rl2": GpuJob(
        python="3.11",
        requirements=("torch==2.8.0", "rl-square==0.0.2", *ENV_PACKAGES),
        built=("flash-attn==2.8.3", "flashinfer-python==0.3.1", *ENV_BUILT),
        expand=("sglang[all]==0.5.2",),
        why="rl-square 0.0.2 pins torch 2.8.0, sglang[all] 0.5.2 and flash-attn 2.8.3; "
        "sglang 0.5.2's srt extra pins flashinfer-python 0.3.1, published as an sdist only",
    ),
    "roll": GpuJob(
        python="3.11",
        requirements=("torch==2.8.0", "vllm==0.10.2", "gem-llm==0.0.4"),
        built=("flash-attn==2.8.3", *ENV_BUILT),
        expand=("reasoning-gym==0.1.23",),
        checkout=Checkout(
            url="https://github.com/alibaba/ROLL",
            commit=ROLL_COMMIT,
            directory="ROLL",
            requirements="requirements_torch280_vllm.txt",
        ),
        why="ROLL is git only; its requirements_torch280_vllm.txt pins torch 2.8.0 and vllm "
        "0.10.2 and leaves flash-attn to be built; its gem-llm 0.0.4 pins reasoning-gym "
        "0.1.23, so this job's rg env comes from 0.1.23 (the others' from 0.1.25)",
    ),
    "trl": GpuJob(
        python="3.11",
        requirements=("torch==2.11.0", "trl==1.16.0", *ENV_PACKAGES),
        built=ENV_BUILT,
        why="TRL 1.16 requires Python >= 3.11; it pulls no torch of its own (pinned here)",
    ),
}
"""Each trainer's job, in the order of the workflow's matrix."""


def _name(requirement: str) -> str:
    """The normalised project name of a requirement string (``verl[vllm]==0.9.1`` -> ``verl``)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group()).lower()


def _exact(requirement: str, extras: bool = True) -> str:
    """`requirement` with ``==`` made ``===`` (exactly that version: ``torch==2.8.0`` also
    matches a local ``2.8.0+cpu`` build, which a machine's own wheel folder may offer and
    the GPU runner must not get); without extras unless `extras` (pip refuses extras in a
    constraints file)."""
    exact = re.sub(r"==(?!=)", "===", requirement)
    return exact if extras else re.sub(r"\[[^\]]*\]", "", exact)


def install_commands(job: GpuJob, python: str = "python") -> list[list[str]]:
    """The commands that install `job` into the venv of `python`, in order (module docstring).

    Run from the repository root (xpgym is installed editable from ``.``).
    """
    pip = [python, "-m", "pip", "install"]
    commands: list[list[str]] = []
    if job.checkout is not None:
        where = job.checkout.directory
        commands += [
            ["git", "init", "-q", where],
            ["git", "-C", where, "fetch", "--depth", "1", job.checkout.url, job.checkout.commit],
            ["git", "-C", where, "checkout", "-q", "FETCH_HEAD"],
        ]
    commands.append([*pip, job.torch_pin()])
    if job.built:
        commands.append([*pip, *BUILD_TOOLS])
        commands.append([*pip, "--no-build-isolation", "--no-deps", *job.built])
    main_install = [*pip, "-e", ".", *job.requirements]
    if job.checkout is not None:
        main_install += ["-r", f"{job.checkout.directory}/{job.checkout.requirements}"]
    commands.append(main_install)
    return commands


# --------------------------------------------------------------------------------------
# Resolution for another Python (CI)
# --------------------------------------------------------------------------------------


@dataclass
class Resolution:
    """What `resolve` found for one job.

    Attributes:
        python: The Python it resolved for.
        problems: What cannot install (empty: the job resolves), each naming the step and
            pip's own error line.
        seconds: Wall seconds of each step (``top``, ``dependencies``, ``built``).
        versions: The resolved version of every top package with dependencies and every
            package of step 2 (name -> version).
    """

    python: str
    problems: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)


def _pip_target(python: str) -> list[str]:
    """pip's options that resolve for `python` on `RUNNER_PLATFORMS` without installing."""
    platforms = [arg for tag in RUNNER_PLATFORMS for arg in ("--platform", tag)]
    return [
        "--dry-run",
        "--use-feature=fast-deps",  # metadata by HTTP range requests, not whole wheels
        "--ignore-installed",
        "--only-binary=:all:",
        "--implementation",
        "cp",
        "--python-version",
        python,
        *platforms,
    ]


def _pip(args: Sequence[str], report: Path | None = None) -> tuple[str | None, dict[str, object]]:
    """Run ``pip install <args>`` (with ``--report`` when `report` is given): ``(error,
    report)``; `error` is pip's last ``ERROR:`` lines (None on success)."""
    argv = [sys.executable, "-m", "pip", "install", "--quiet", *args]
    with tempfile.TemporaryDirectory() as target:
        argv += ["--target", target]  # pip < 23.3 wants a target for --platform with --dry-run
        if report is not None:
            argv += ["--report", str(report)]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode:
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR:")]
        return " / ".join(errors[-2:]) or done.stderr.strip()[-500:], {}
    return None, json.loads(report.read_text()) if report else {}


def _declared(
    report: dict[str, object], extras: dict[str, set[str]], python: str, skip: set[str]
) -> list[str]:
    """The declared requirements of the packages in a ``--no-deps`` pip `report`, for
    `python` on Linux x86-64 with the `extras` asked for each (by name; an extra that asks
    for the package's own other extras is expanded), less those whose names are in `skip`."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    environment = {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
    }
    out: list[str] = []
    for item in report["install"]:  # type: ignore[attr-defined]
        metadata = item["metadata"]
        own = canonicalize_name(metadata["name"])
        declared = [Requirement(text) for text in metadata.get("requires_dist", [])]
        asked, pending = {""}, extras.get(own, set())
        while pending:
            asked |= pending
            pending = {
                canonicalize_name(extra)
                for req in declared
                if canonicalize_name(req.name) == own and _applies(req, environment, asked)
                for extra in req.extras
            } - asked
        for req in declared:
            name = canonicalize_name(req.name)
            if name == own or name in skip or not _applies(req, environment, asked):
                continue
            req.marker = None
            out.append(str(req))
    return out


def _applies(requirement: object, environment: dict[str, str], extras: set[str]) -> bool:
    """Whether `requirement`'s marker holds in `environment` for any of `extras`."""
    marker = requirement.marker  # type: ignore[attr-defined]
    return marker is None or any(
        marker.evaluate({**environment, "extra": extra}) for extra in sorted(extras)
    )


def _published(requirement: str, python: str) -> str | None:
    """None when `requirement` (``name==version``) is published for `python` (as a wheel or
    an sdist); otherwise what pip says."""
    name, _, version = requirement.partition("==")
    argv = [sys.executable, "-m", "pip", "index", "versions", name, "--python-version", python]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    listed = re.search(r"Available versions: (.*)", done.stdout)
    if listed is None or version not in [v.strip() for v in listed.group(1).split(",")]:
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR:")]
        return f"source-built {requirement}: not published ({' / '.join(errors) or done.stdout})"
    return None


def resolve(job: GpuJob, python: str | None = None) -> Resolution:
    """Whether `job` installs for `python` (default ``job.python``) on the runner's platform,
    by pip's resolver against the package registries (module docstring: steps 1-3).

    Step 2 resolves the declared requirements of the top packages (less the source-built
    ones) under a constraints file of the top pins, so a top package pinned here wins
    wherever another asks for it.

    Returns:
        The `Resolution`; ``problems`` empty when every step resolved.
    """
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    python = python or job.python
    result = Resolution(python=python)
    target = _pip_target(python)
    built = {_name(r) for r in job.built}
    with_deps = (*job.requirements, *job.expand)
    asked = {_name(r): {canonicalize_name(e) for e in Requirement(r).extras} for r in with_deps}
    with tempfile.TemporaryDirectory() as scratch:
        top = [*job.requirements, *job.expand]
        begin = time.perf_counter()
        exact = [_exact(r) for r in top]
        error, report = _pip([*target, "--no-deps", *exact], Path(scratch, "top.json"))
        result.seconds["top"] = time.perf_counter() - begin
        if error:
            result.problems.append(f"top packages {' '.join(top)}: {error}")
            return result
        resolved = [
            item
            for item in report["install"]  # type: ignore[attr-defined]
            if _name(item["metadata"]["name"]) in asked
        ]
        result.versions = {_name(i["metadata"]["name"]): i["metadata"]["version"] for i in resolved}
        expanded = {_name(r) for r in job.expand}
        declared = _declared({"install": resolved}, asked, python, built | expanded)
        constraints = Path(scratch, "pins.txt")
        constraints.write_text("".join(_exact(r, extras=False) + "\n" for r in with_deps))
        begin = time.perf_counter()
        error, report = _pip(
            [*target, "-c", str(constraints), *declared], Path(scratch, "deps.json")
        )
        result.seconds["dependencies"] = time.perf_counter() - begin
    if error:
        result.problems.append(f"dependencies of {' '.join(job.requirements)}: {error}")
    else:
        result.versions.update(
            (_name(item["metadata"]["name"]), item["metadata"]["version"])
            for item in report["install"]  # type: ignore[attr-defined]
        )
    begin = time.perf_counter()
    result.problems += [p for p in (_published(r, python) for r in job.built) if p]
    result.seconds["built"] = time.perf_counter() - begin
    return result


CONTROL = ("oat", "3.11")
"""A job that must not resolve (oat-llm 0.2.4 requires Python < 3.11): `resolve_all` resolves
it too, so that a resolution which reports nothing wrong is shown able to fail."""

REPORT_NAME = "xpgym-gpu-jobs.json"
"""The file, in the test environment's venv, where ``scripts/setup.sh`` writes `resolve_all`."""


def fingerprint() -> str:
    """A digest of what a resolution depends on here: `JOBS`, `RUNNER_PLATFORMS`, `CONTROL`."""
    text = repr((sorted(JOBS.items()), RUNNER_PLATFORMS, CONTROL))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def resolve_all(report: Path) -> bool:
    """Resolve every job for its Python and `CONTROL` for its, and write the JSON `report`:
    ``fingerprint``, ``jobs`` (name -> `Resolution` as a dict) and ``control``. Returns
    whether every job resolved and the control did not."""
    jobs = {}
    for name, job in JOBS.items():
        jobs[name] = resolve(job)
        logger.info("%s on Python %s: %d problems", name, job.python, len(jobs[name].problems))
    trainer, python = CONTROL
    control = resolve(JOBS[trainer], python)
    content = {
        "fingerprint": fingerprint(),
        "jobs": {name: asdict(result) for name, result in jobs.items()},
        "control": {"trainer": trainer, **asdict(control)},
    }
    report.write_text(json.dumps(content, indent=2) + "\n")
    return all(not r.problems for r in jobs.values()) and bool(control.problems)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: ``install`` runs (or with ``--dry-run`` prints) `install_commands`
    and returns the first failing command's status; ``resolve`` logs `resolve`'s steps and
    returns 1 when the job does not resolve (``--all``: `resolve_all`, 1 when it is not all
    as expected)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    install = commands.add_parser("install", help="install one trainer's job into this venv")
    install.add_argument("--trainer", choices=JOBS, required=True)
    install.add_argument("--dry-run", action="store_true", help="print the commands only")
    check = commands.add_parser("resolve", help="resolve one trainer's job (or all) for its Python")
    which = check.add_mutually_exclusive_group(required=True)
    which.add_argument("--trainer", choices=JOBS)
    which.add_argument("--all", action="store_true", help="every job and CONTROL (resolve_all)")
    check.add_argument("--python", help="resolve for this X.Y instead of the job's own")
    check.add_argument("--report", type=Path, help="with --all: the JSON report to write")
    args = parser.parse_args(argv)
    if args.command == "resolve" and args.all:
        if args.report is None or args.python:
            parser.error("resolve --all takes --report and no --python")
        return 0 if resolve_all(args.report) else 1
    job = JOBS[args.trainer]
    if args.command == "install":
        if sys.version_info[:2] != tuple(int(x) for x in job.python.split(".")):
            found = ".".join(map(str, sys.version_info[:2]))
            parser.error(f"the {args.trainer} job runs on Python {job.python}, this is {found}")
        for command in install_commands(job, sys.executable):
            sys.stdout.write(shlex.join(command) + "\n")
            sys.stdout.flush()
            if not args.dry_run:
                status = subprocess.run(command, check=False).returncode
                if status:
                    return status
        return 0
    result = resolve(job, args.python)
    for step, seconds in result.seconds.items():
        logger.info("%s: %s %.1f s", args.trainer, step, seconds)
    for problem in result.problems:
        logger.error("%s on Python %s: %s", args.trainer, result.python, problem)
    logger.info("%s: %d packages resolved", args.trainer, len(result.versions))
    return 1 if result.problems else 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
