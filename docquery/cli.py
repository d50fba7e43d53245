"""The ``docquery`` console script: builds the parser from docquery/commands/ and maps errors to exit codes.

``docquery ingest`` is contributed by the ``ingest`` package through the ``docquery.commands`` entry-point
group, so this module never imports ``ingest``. Exit codes: docquery.core.exits.ExitCode (docs/contract.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from docquery.commands import ask, audit, config, serve
from docquery.commands import eval as eval_command
from docquery.config.settings import Settings, SettingsError, load_settings
from docquery.core.errors import (
    BusyError,
    DocQueryError,
    EmbedderUnreachable,
    EmptyIndexError,
    ServiceUnavailable,
    VectorIndexError,
    VectorIndexUnreachable,
)
from docquery.core.exits import ExitCode
from docquery.runtime.logs import configure_logging, resolve_format


def docquery_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("docquery")
    except PackageNotFoundError:
        return "unknown (not installed)"


class _Version(argparse.Action):
    """argparse's version action, reading the installed version only when asked (it costs an import)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        sys.stdout.write(f"{parser.prog} {docquery_version()}\n")  # where argparse's version action writes
        parser.exit()


BUILT_IN = (ask, serve, eval_command, config, audit)
_BUILT_IN_NAMES = frozenset({"ask", "serve", "eval", "config", "audit"})


def build_parser(*, plugins: bool = True) -> argparse.ArgumentParser:
    """``plugins``: also the commands of the ``docquery.commands`` entry points (loading one imports its package)."""
    parser = argparse.ArgumentParser(prog="docquery", description="Secure question answering over your documents.")
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in BUILT_IN:
        command.register(sub)
    if plugins:
        from importlib.metadata import entry_points

        for ep in entry_points(group="docquery.commands"):
            ep.load()(sub)
    return parser


def _names_a_built_in(argv: Sequence[str]) -> bool:
    # `docquery ask ...` need not import ingest (about a second) to parse its own flags.
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    return command in _BUILT_IN_NAMES


def _log_level(args: argparse.Namespace, configured: str) -> str:
    """A command whose output is for a person (``ask``) logs warnings only, unless DOCQUERY_LOG_LEVEL says
    otherwise: its terminal shows the answer, not the model loading."""
    if getattr(args, "quiet_logs", False) and not any(k.upper() == "DOCQUERY_LOG_LEVEL" for k in os.environ):
        return "WARNING"
    return configured


def _early_logging(args: argparse.Namespace) -> None:
    """Until settings are loaded (they may warn), log as the environment asks, best effort."""
    try:
        configure_logging(
            _log_level(args, os.environ.get("DOCQUERY_LOG_LEVEL", "INFO")),
            resolve_format(os.environ.get("DOCQUERY_LOG_FORMAT", "auto"), stream=sys.stderr, prefer_json=False),
        )
    except DocQueryError:
        configure_logging("INFO", "text")


def _settings(args: argparse.Namespace) -> Settings:
    from docquery.secrets import refuse_env_secrets

    settings = load_settings()
    # Before any command looks at the index: prod refuses a secret left in the environment.
    refuse_env_secrets(settings.profile)
    fmt = resolve_format(
        settings.log_format,
        stream=sys.stderr,
        prefer_json=settings.is_prod or bool(getattr(args, "prefer_json_logs", False)),
    )
    configure_logging(_log_level(args, settings.log_level), fmt)
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(plugins=not _names_a_built_in(argv))
    args = parser.parse_args(argv)
    _early_logging(args)
    settings = None
    if getattr(args, "needs_settings", True):
        try:
            settings = _settings(args)
        except (SettingsError, ValueError, DocQueryError) as exc:
            sys.stderr.write(f"docquery: configuration error: {_first_line(exc)}\n")
            return ExitCode.USAGE
    try:
        return _run(args, settings)
    except DocQueryError as exc:
        sys.stderr.write(f"docquery: {exc}\n")
        return exit_code(exc)
    except KeyboardInterrupt:
        sys.stderr.write("docquery: interrupted\n")
        return ExitCode.INTERRUPTED
    except Exception as exc:
        # Last resort, as the service's: a bug, in one line. The type and the innermost frame, never the
        # message or a traceback, which may quote a document or the question.
        sys.stderr.write(f"docquery: internal error ({_where(exc)}): a bug, please report this line\n")
        return ExitCode.FAILED


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return type(exc).__name__
    last = frames[-1]
    return f"{type(exc).__name__} at {Path(last.filename).name}:{last.lineno}"


def _run(args: argparse.Namespace, settings: Settings | None) -> int:
    from docquery.runtime.preflight import is_lock_failure

    try:
        return int(args.handler(args, settings))
    except VectorIndexError as exc:
        if is_lock_failure(exc):  # opened by another process between the check and the open
            raise BusyError("the embedded index is open in another process: stop it and retry") from None
        raise


def exit_code(exc: DocQueryError) -> ExitCode:
    if isinstance(exc, BusyError):
        return ExitCode.BUSY
    if isinstance(exc, VectorIndexUnreachable | EmbedderUnreachable | ServiceUnavailable):
        # Not the 2 of a configuration error, which the ingest Job fails for good (its podFailurePolicy):
        # a Qdrant or embedding server that is restarting is retried.
        return ExitCode.UNAVAILABLE
    if isinstance(exc, EmptyIndexError):
        return ExitCode.EMPTY
    return ExitCode.USAGE


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


if __name__ == "__main__":
    raise SystemExit(main())
