"""Command line: ``python -m xpgym <command>`` (also installed as ``xpgym``).

Commands:
    list [PATTERN] [--json]   Registered env ids with description and entry point.
    serve --env GLOB [--port N] [--token T] ...
                              Serve envs over HTTP (see `xpgym.remote.server`).
    eval --env GLOB --model SPEC [--episodes N] [--samples K] ...
                              Evaluate a model on envs (see `xpgym.eval`, docs/eval.md).
    view PATH [-o OUT.html] [--tokenizer PATH]
                              Write a static HTML trajectory viewer (docs/viewer.md).
    synth [--env GLOB] [--seeds N | --tasks FILE.jsonl] --out DIR
                              Run the toolgym oracles and apply CodeGym's quality filters
                              (see `xpgym.envs.toolgym.synth`).

Output goes through `sys.stdout.write` (the project's lint forbids `print` in the package).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict

from xpgym.envs.catalogue import DOWNLOAD_NOTE, EnvRow, env_rows
from xpgym.remote.guard import MAX_ACTION_CHARS, MAX_BODY_BYTES, RATE_LIMIT

__all__ = ["build_parser", "main"]

_GLOB_CHARS = frozenset("*?[")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, one subcommand per command (each sets ``func``)."""
    parser = argparse.ArgumentParser(
        prog="xpgym", description="xpgym: a gym for agentic LLMs (text environments)."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    listing = commands.add_parser(
        "list",
        help="list registered env ids",
        description="List registered env ids with their description and entry point.",
    )
    listing.add_argument(
        "pattern",
        nargs="?",
        metavar="PATTERN",
        help="glob over ids, e.g. 'game:*' or '*-easy'; without a wildcard, ids containing "
        "PATTERN (case-sensitive)",
    )
    listing.add_argument(
        "--json",
        action="store_true",
        help="print a JSON list of {id, description, entry_point, kwargs} objects",
    )
    listing.set_defaults(func=_list_command)
    _add_serve_parser(commands)
    _add_eval_parser(commands)
    _add_view_parser(commands)
    _add_synth_parser(commands)
    return parser


def _add_serve_parser(commands: argparse._SubParsersAction) -> None:
    serving = commands.add_parser(
        "serve",
        help="serve envs over HTTP for remote clients",
        description="Serve envs over HTTP/JSON in sessions. Clients use "
        "xpgym.make('remote:http://HOST:PORT/<env id>'). Protocol: xpgym.remote.server. "
        "Each env id is also an OpenEnv environment at http://HOST:PORT/openenv/<env id> "
        "(OpenEnv's GenericEnvClient; see xpgym.remote.openenv_server).",
    )
    serving.add_argument(
        "--env",
        action="append",
        required=True,
        metavar="GLOB",
        help="env ids clients may create (glob, repeatable), e.g. 'game:*' or '*'",
    )
    serving.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default %(default)s)"
    )
    serving.add_argument("--port", type=int, default=8000, help="port (default %(default)s)")
    serving.add_argument(
        "--max-sessions", type=int, default=256, help="open sessions allowed (default %(default)s)"
    )
    serving.add_argument(
        "--idle-timeout",
        type=float,
        default=300.0,
        help="seconds without a request before a session is closed (default %(default)s)",
    )
    serving.add_argument(
        "--threads", type=int, default=None, help="threads for env calls (default: max sessions)"
    )
    serving.add_argument(
        "--token",
        default=None,
        help="bearer token every request must carry (default: $XPGYM_SERVER_TOKEN; prefer the "
        "variable: other users can read command lines). Without one the server only binds "
        "to loopback",
    )
    serving.add_argument(
        "--max-sessions-per-client",
        type=int,
        default=None,
        help="open sessions one client (remote address) may hold; more get 429 (default: "
        "--max-sessions)",
    )
    serving.add_argument(
        "--rate-limit",
        type=float,
        default=RATE_LIMIT,
        help="requests per second one client may make on average; more get 429 with "
        "Retry-After; 0 turns it off (default %(default)g)",
    )
    serving.add_argument(
        "--rate-burst",
        type=int,
        default=None,
        help="requests one client may make at once (default: 2 x --rate-limit)",
    )
    serving.add_argument(
        "--max-body-bytes",
        type=int,
        default=MAX_BODY_BYTES,
        help="largest request body in bytes; larger get 413 (default %(default)s = 8 MiB)",
    )
    serving.add_argument(
        "--max-action-chars",
        type=int,
        default=MAX_ACTION_CHARS,
        help="longest step action in characters; longer get 413 (default %(default)s)",
    )
    serving.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (e.g. one that registers your envs); repeatable",
    )
    serving.add_argument("--log-level", default="warning", help="log level (default %(default)s)")
    serving.set_defaults(func=_serve_command)


def _add_eval_parser(commands: argparse._SubParsersAction) -> None:
    evaluating = commands.add_parser(
        "eval",
        help="evaluate a model on envs",
        description="Play N seeds x K samples of each env with a model; write per-episode "
        "JSONL transcripts, a summary table (success, return, turns, Pass@k, invalid actions, "
        "tokens) as JSON and a PNG. Re-running with the same --out resumes. See docs/eval.md.",
    )
    _add_eval_subject_arguments(evaluating)
    _add_eval_sampling_arguments(evaluating)
    _add_eval_run_arguments(evaluating)
    _add_eval_http_arguments(evaluating)
    evaluating.add_argument("--device", default=None, help="device of local models")
    evaluating.add_argument("--log-level", default="warning", help="log level (default warning)")
    evaluating.set_defaults(func=_eval_command)


def _add_eval_subject_arguments(evaluating: argparse.ArgumentParser) -> None:
    """What ``eval`` plays: the envs, the models, the seeds and samples."""
    evaluating.add_argument(
        "--env",
        action="append",
        required=True,
        metavar="ID_OR_GLOB",
        help="env id, or glob over ids (e.g. 'game:*-easy'); repeatable",
    )
    evaluating.add_argument(
        "--model",
        metavar="SPEC",
        help="model under test: http(s)://HOST:PORT/v1#SERVED_MODEL (OpenAI-compatible), "
        "vllm:PATH, a local transformers path or hub id, or 'random'/'scripted' (the env's "
        "sample_random_action)",
    )
    evaluating.add_argument(
        "--agent-model",
        action="append",
        default=[],
        type=_agent_model,
        metavar="AGENT=SPEC",
        help="model of one agent of multi-agent envs (others use --model); repeatable",
    )
    evaluating.add_argument(
        "--episodes", type=int, default=10, help="seeds per env (default %(default)s)"
    )
    evaluating.add_argument("--seed", type=int, default=0, help="first seed (default %(default)s)")
    evaluating.add_argument(
        "--samples", type=int, default=1, help="episodes per seed, for Pass@k (default 1)"
    )


def _add_eval_sampling_arguments(evaluating: argparse.ArgumentParser) -> None:
    """How ``eval`` decodes and how long an episode may run."""
    evaluating.add_argument(
        "--temperature", type=float, default=0.0, help="0 decodes greedily (default 0)"
    )
    evaluating.add_argument("--top-p", type=float, default=1.0, help="nucleus mass (default 1)")
    evaluating.add_argument(
        "--max-new-tokens", type=int, default=256, help="tokens per turn (default %(default)s)"
    )
    evaluating.add_argument("--max-turns", type=int, default=None, help="turns per episode")
    evaluating.add_argument("--system-prompt", default=None, help="system message")


def _add_eval_run_arguments(evaluating: argparse.ArgumentParser) -> None:
    """How ``eval`` runs: concurrency, the output directory, resuming, downloads."""
    evaluating.add_argument(
        "--concurrency", type=int, default=8, help="episodes in flight (default %(default)s)"
    )
    evaluating.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="output directory; an existing run there is resumed (default results/eval/<UTC time>)",
    )
    evaluating.add_argument(
        "--retry-failed", action="store_true", help="re-run episodes recorded as failed"
    )
    evaluating.add_argument(
        "--allow-download", action="store_true", help="include ids that download data"
    )


def _add_eval_http_arguments(evaluating: argparse.ArgumentParser) -> None:
    """How ``eval`` talks to URL models: the API key, timeouts and retries."""
    evaluating.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="NAME",
        help="environment variable holding the API key of URL models (default %(default)s)",
    )
    evaluating.add_argument(
        "--timeout", type=float, default=60.0, help="seconds per HTTP read (default 60)"
    )
    evaluating.add_argument(
        "--max-retries", type=int, default=5, help="retries per HTTP request (default 5)"
    )
    evaluating.add_argument(
        "--retry-backoff",
        type=float,
        default=0.5,
        help="seconds before the first HTTP retry, doubling each retry (default 0.5)",
    )


def _add_view_parser(commands: argparse._SubParsersAction) -> None:
    viewing = commands.add_parser(
        "view",
        help="write a static HTML viewer of episodes",
        description="Write one self-contained HTML file (no server, no network) showing "
        "episodes turn by turn, with filters, search and a token view. See docs/viewer.md.",
    )
    viewing.add_argument(
        "source",
        metavar="PATH",
        help="episodes JSONL (save_episodes output), an eval output directory or its "
        "episodes.jsonl, or a parity golden file",
    )
    viewing.add_argument(
        "-o",
        "--out",
        default=None,
        metavar="OUT.html",
        help="HTML file to write (default results/viewer/<name>.html)",
    )
    viewing.add_argument(
        "--tokenizer",
        default=None,
        metavar="PATH",
        help="tokenizer (directory or name, loaded with transformers) to show token text "
        "in the token view; without it token ids are shown",
    )
    viewing.add_argument("--title", default=None, help="page title")
    viewing.set_defaults(func=_view_command)


def _add_synth_parser(commands: argparse._SubParsersAction) -> None:
    synth = commands.add_parser(
        "synth",
        help="run the toolgym oracles and filter tasks as CodeGym does",
        description="Run the oracle of every toolgym task (each id x N seeds, or task strings "
        "from a JSONL file), flag tasks whose oracle makes fewer than --t-min or more than "
        "--t-max tool calls or uses fewer than --min-tools distinct tools, and write the kept "
        "task strings (tasks.jsonl) and a summary (summary.json) to --out. Exits 1 if an "
        "oracle fails (an env bug).",
    )
    synth.add_argument(
        "--env",
        action="append",
        default=None,
        metavar="GLOB",
        help="toolgym ids to draw tasks from (glob, repeatable; default 'toolgym:*')",
    )
    synth.add_argument("--seeds", type=int, default=10, help="seeds per id (default %(default)s)")
    synth.add_argument(
        "--tasks",
        default=None,
        metavar="FILE.jsonl",
        help='read task strings (one JSON string or {"task": ...} a line) instead of drawing',
    )
    synth.add_argument("--out", required=True, metavar="DIR", help="output directory")
    synth.add_argument("--t-min", type=int, default=10, help="fewest oracle calls (default 10)")
    synth.add_argument("--t-max", type=int, default=256, help="most oracle calls (default 256)")
    synth.add_argument("--min-tools", type=int, default=4, help="fewest distinct tools (default 4)")
    synth.set_defaults(func=_synth_command)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with `argv` (default `sys.argv[1:]`); return the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    args.argv = argv
    return args.func(args)


def _list_command(args: argparse.Namespace) -> int:
    pattern = args.pattern
    if pattern is not None and not _GLOB_CHARS & set(pattern):
        pattern = f"*{pattern}*"
    rows = env_rows(pattern, include_families=True)
    if args.json:
        sys.stdout.write(json.dumps([asdict(r) for r in rows], indent=2, default=repr) + "\n")
        return 0
    if not rows:
        sys.stderr.write(f"no env ids match {args.pattern!r}\n")
        return 1
    sys.stdout.write(_text_table(rows) + "\n")
    return 0


def _serve_command(args: argparse.Namespace) -> int:
    from xpgym.remote import TOKEN_ENV
    from xpgym.remote.guard import check_bind
    from xpgym.remote.server import serve  # needs starlette + uvicorn: import on use

    token = args.token or os.environ.get(TOKEN_ENV) or None
    try:
        check_bind(args.host, token)
    except ValueError as exc:
        sys.stderr.write(f"xpgym serve: error: {exc}\n")
        return 2
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    for module in args.imports:
        importlib.import_module(module)
    sys.stderr.write(
        f"serving {', '.join(args.env)} on http://{args.host}:{args.port} "
        f"(max {args.max_sessions} sessions, idle timeout {args.idle_timeout:g} s, "
        f"{'bearer token required' if token else 'no token: loopback only'})\n"
    )
    serve(
        args.env,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        max_sessions=args.max_sessions,
        idle_timeout=args.idle_timeout,
        threads=args.threads,
        token=token,
        max_sessions_per_client=args.max_sessions_per_client,
        rate_limit=args.rate_limit,
        rate_burst=args.rate_burst,
        max_body_bytes=args.max_body_bytes,
        max_action_chars=args.max_action_chars,
    )
    return 0


def _agent_model(text: str) -> tuple[str, str]:
    agent, sep, model = text.partition("=")
    if not sep or not agent or not model:
        raise argparse.ArgumentTypeError(f"expected AGENT=SPEC, got {text!r}")
    return agent, model


def _eval_command(args: argparse.Namespace) -> int:
    from xpgym.core.registry import UnknownEnvError
    from xpgym.eval import report
    from xpgym.eval.runner import EvalConfig, Evaluation, default_out_dir

    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        config = EvalConfig(
            envs=args.env,
            out=args.out or default_out_dir(),
            model=args.model,
            agent_models=dict(args.agent_model),
            episodes=args.episodes,
            seed=args.seed,
            samples=args.samples,
            temperature=args.temperature,
            top_p=args.top_p,
            max_new_tokens=args.max_new_tokens,
            max_turns=args.max_turns,
            system_prompt=args.system_prompt,
            concurrency=args.concurrency,
            retry_failed=args.retry_failed,
            allow_download=args.allow_download,
            api_key_env=args.api_key_env,
            timeout=args.timeout,
            max_retries=args.max_retries,
            retry_backoff=args.retry_backoff,
            device=args.device,
            command=["xpgym", *args.argv],
        )
        evaluation = Evaluation(config)
        done = len(evaluation.keys) - len(evaluation.pending)
        if done:
            sys.stderr.write(
                f"resuming {evaluation.out_dir}: {done} of {len(evaluation.keys)} episodes "
                "already recorded\n"
            )
        with report.progress_bar(len(evaluation.pending)) as advance:
            evaluation.run(on_record=advance)
    # bad settings, unknown ids, a missing backend, a model or env that does not load
    except (ValueError, UnknownEnvError, ImportError, OSError) as exc:
        sys.stderr.write(f"xpgym eval: error: {exc}\n")
        return 2
    summary = evaluation.summarize()
    sys.stdout.write(report.format_table(summary.rows) + "\n")
    sys.stderr.write(
        f"{summary.completed} of {summary.planned} episodes completed, {summary.failed} "
        f"failed, {summary.infra_errors} infrastructure errors; wrote "
        f"{evaluation.episodes_path}, " + ", ".join(str(path) for path in summary.files) + "\n"
    )
    sys.stderr.write(f"view the episodes: python -m xpgym view {evaluation.out_dir}\n")
    if summary.failed or summary.infra_errors:
        sys.stderr.write("re-run with the same --out and --retry-failed to retry the failed ones\n")
    return 1 if summary.failed or summary.infra_errors else 0


def _view_command(args: argparse.Namespace) -> int:
    from xpgym.viewer import write_viewer

    try:
        written = write_viewer(args.source, args.out, tokenizer=args.tokenizer, title=args.title)
    except (ValueError, ImportError, OSError) as exc:
        sys.stderr.write(f"xpgym view: error: {exc}\n")
        return 2
    sys.stdout.write(
        f"wrote {written.path} ({written.episodes} episodes); open it in a browser: "
        f"{written.path.resolve().as_uri()}\n"
    )
    return 0


def _synth_command(args: argparse.Namespace) -> int:
    from xpgym.core.registry import list_envs
    from xpgym.envs.toolgym import synth
    from xpgym.eval.report import progress_bar

    filters = synth.Filters(args.t_min, args.t_max, args.min_tools)
    if args.tasks is not None:
        try:
            tasks: list[tuple[str, int | None, str]] = list(synth.file_tasks(args.tasks))
        except (OSError, ValueError) as exc:
            sys.stderr.write(f"xpgym synth: error: {exc}\n")
            return 2
    else:
        patterns = args.env or ["toolgym:*"]
        ids = [
            env_id
            for pattern in patterns
            for env_id in list_envs(pattern)
            if env_id.startswith("toolgym:")
        ]
        if not ids:
            sys.stderr.write(f"xpgym synth: no toolgym ids match {patterns}\n")
            return 2
        tasks = list(synth.generated_tasks(dict.fromkeys(ids), args.seeds))
    with progress_bar(len(tasks)) as advance:
        report = synth.synthesize(
            tasks,
            filters,
            on_result=lambda r: advance({"status": "failed" if r.error else "done"}),
        )
    tasks_path, summary_path = synth.write_report(report, args.out)
    summary = report.summary()
    lines = [
        f"{'group':36} {'tasks':>5} {'kept':>5} {'drop':>5} {'fail':>4}  calls min/mean/max  tools"
    ]
    for name, group in summary["groups"].items():
        calls, tools = group["oracle_calls"] or {}, group["distinct_tools"] or {}
        lines.append(
            f"{name:36} {group['tasks']:5} {group['kept']:5} {group['dropped']:5} "
            f"{group['failed']:4}  {calls.get('min', '-')}/{calls.get('mean', '-')}/"
            f"{calls.get('max', '-')}  {tools.get('min', '-')}-{tools.get('max', '-')}"
            + (
                f"  ({', '.join(f'{k} {v}' for k, v in group['dropped_by'].items())})"
                if group["dropped_by"]
                else ""
            )
        )
    lines.append(
        f"kept {summary['kept']} of {summary['tasks']} tasks; {summary['failed']} oracle "
        f"failures; wrote {tasks_path} and {summary_path}"
    )
    sys.stdout.write("\n".join(lines) + "\n")
    for failure in report.failures:
        sys.stderr.write(f"oracle failed on {failure.task[:200]}: {failure.error}\n")
    return 1 if report.failures else 0


def _text_table(rows: list[EnvRow]) -> str:
    table = [("ID", "DESCRIPTION", "ENTRY POINT")]
    table += [
        (
            row.id,
            (row.description or "-") + (DOWNLOAD_NOTE if row.requires_download else ""),
            row.entry_point,
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(2)]
    return "\n".join(
        f"{env_id:<{widths[0]}}  {description:<{widths[1]}}  {entry_point}"
        for env_id, description, entry_point in table
    )


if __name__ == "__main__":
    sys.exit(main())
