"""What every command shares: the store and output options, error handling, stdout and stderr.

Nothing heavy is imported at module level: ``proflake --help`` loads click and proflake's CLI modules
only; pyarrow, DuckDB and deltalake load when a command runs, rich when it draws on a terminal.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from proflake.errors import ExitCode, ProflakeError, Terminated, UsageError
from proflake.query.names import PROFILERS
from proflake.render.output import BINARY_FORMATS, FORMATS
from proflake.store.location import default_store_location

if TYPE_CHECKING:
    import pyarrow as pa

_COLUMNS_KEY = "proflake.columns"


def say(message: str) -> None:
    """A line for the person at the terminal, on stderr; names in it (jobs, files, functions) cannot
    send control characters to the terminal."""
    from proflake.numbers import printable

    click.echo(printable(message, keep_newlines=True), err=True)


def say_fitted(message: str) -> None:
    """``say``, wrapped to the terminal's width when stdout is a terminal (the hints under a table)."""
    width = terminal_width()
    if width is not None:
        from proflake.render.terminal import fit_message

        message = fit_message(message, width)
    say(message)


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def terminal_width() -> int | None:
    """The width of the terminal stdout writes to (``$COLUMNS`` wins), or None when it is not one."""
    if not stdout_is_terminal():
        return None
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError):
        return 80


def emit(
    table: pa.Table,
    fmt: str,
    output: str | None,
    *,
    kind: str | None = None,
    group_by: Sequence[str] = (),
    limit_rows: bool = True,
) -> None:
    """Print or save ``table``. A terminal gets the default columns of ``kind`` (or ``--columns``),
    fitted to its width, at most TERMINAL_ROWS rows per group unless ``limit_rows`` is False; a pipe,
    a file and the csv/json/parquet formats get every row and column, in full (see docs/cli.md)."""
    from proflake.render.columns import choose_columns

    requested = click.get_current_context().meta.get(_COLUMNS_KEY)
    width = None if output or fmt != "table" else terminal_width()
    if width is None:
        if fmt in BINARY_FORMATS and not output and stdout_is_terminal():
            raise UsageError(
                f"--format {fmt} writes binary data, which a terminal cannot show; pass --output FILE "
                f"(or redirect: > result.{fmt})"
            )
        _write(choose_columns(table, requested), fmt, output)
    else:
        _emit_terminal(table, width, requested, kind, group_by, limit_rows)


def _write(table: pa.Table, fmt: str, output: str | None) -> None:
    from proflake.render.output import render

    data = render(table, fmt)
    if output:
        try:
            with open(output, "wb") as f:
                f.write(data)
        except OSError as e:
            raise ProflakeError(f"cannot write {output!r}: {e.strerror}") from e
        say(f"wrote {table.num_rows} row(s) to {output}")
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def _emit_terminal(
    table: pa.Table, width: int, requested: list[str] | None, kind: str | None, group_by: Sequence[str], limit: bool
) -> None:
    from proflake.render.columns import (
        DEFAULT_COLUMNS,
        PRIORITY,
        TERMINAL_ROWS,
        choose_columns,
        constant_context,
        limit_rows,
    )
    from proflake.render.terminal import draw, draw_errors, fit_message

    if kind == "errors" and requested is None and "message" in table.column_names:
        shown, omitted_errors = limit_rows(table, TERMINAL_ROWS, ()) if limit else (table, 0)
        sys.stdout.write(draw_errors(shown, width))
        sys.stdout.flush()
        if omitted_errors:
            say(fit_message(f"… {omitted_errors:,} more file(s) not shown (the first {TERMINAL_ROWS}); "
                            "--format csv|json, --output FILE or a pipe for every row", width))
        return
    table = choose_columns(table, requested, DEFAULT_COLUMNS.get(kind or ""))
    same: dict[str, object] = {}
    if requested is None:
        table, same = constant_context(table)
    omitted = 0
    if limit:
        table, omitted = limit_rows(table, TERMINAL_ROWS, group_by)
    drawn = draw(table, width, color="NO_COLOR" not in os.environ, priority=PRIORITY.get(kind or "", ()))
    sys.stdout.write(drawn.text)
    sys.stdout.flush()
    if same:
        say(fit_message("every row: " + ", ".join(f"{name} {value}" for name, value in same.items()), width))
    if omitted:
        per = " per group" if group_by else ""
        more = "--top N to show more, or " if kind in PROFILERS else ""
        say(fit_message(f"… {omitted:,} more row(s) not shown (the first {TERMINAL_ROWS}{per}); "
                        f"{more}--format csv|json, --output FILE or a pipe for every row", width))
    if drawn.dropped:
        say(fit_message(f"left out to fit {width} characters: {', '.join(drawn.dropped)}; "
                        "--columns to choose, --columns all for every one", width))


# -- shared options ----------------------------------------------------------------------------------
def store_option(f: Callable) -> Callable:
    """--store, plus the S3 settings a store or source on S3 may need; hands the command a Store."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import inspect

        from proflake.sources.settings import S3Config
        from proflake.store.store import Store

        s3 = S3Config.from_env(kwargs.pop("endpoint_url"), kwargs.pop("aws_profile"))
        kwargs["store"] = Store(kwargs.pop("store"), s3=s3)
        if "s3" in inspect.signature(f).parameters:  # a source on S3 needs them even with a local store
            kwargs["s3"] = s3
        return f(*args, **kwargs)

    wrapper = click.option(
        "--aws-profile", metavar="NAME", help="AWS profile for s3:// stores and sources (default: the standard chain)."
    )(wrapper)
    wrapper = click.option(
        "--endpoint-url",
        metavar="URL",
        help="S3 endpoint for MinIO and other S3-compatible servers (default: $AWS_ENDPOINT_URL_S3 or $AWS_ENDPOINT_URL).",
    )(wrapper)
    return click.option(
        "--store",
        default=None,
        metavar="PATH|S3URI",
        help=f"The store: a folder or s3://bucket/prefix (default: $PROFLAKE_STORE or {default_store_location()!s}).",
    )(wrapper)


def _remember_columns(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    from proflake.render.columns import parse_columns

    ctx.meta[_COLUMNS_KEY] = parse_columns(value)


DEFAULT_TIMEOUT = 600.0  # seconds: a cron'd or BI-driven query should not run unbounded by default


def limit_options(f: Callable) -> Callable:
    """--timeout and --memory-limit, handed to the command as ``timeout`` and ``memory_limit``."""
    f = click.option(
        "--memory-limit", metavar="SIZE",
        help="Cap the memory DuckDB may use, e.g. 4GB or 512MiB (default: DuckDB's 80% of RAM).",
    )(f)
    return click.option(
        "--timeout", type=click.FloatRange(min=0), default=DEFAULT_TIMEOUT, show_default=True, metavar="SECONDS",
        help="Stop a query that runs longer than this (0 = no limit). Ctrl-C also stops it.",
    )(f)


def output_options(f: Callable) -> Callable:
    """--format, --output and --columns; ``emit`` reads --columns, so commands take only fmt and output."""
    f = click.option(
        "--columns", metavar="A,B,...|all", expose_value=False, callback=_remember_columns,
        help="Columns to show, in this order, in every format (default on a terminal: the essential ones; "
        "elsewhere: all).",
    )(f)
    f = click.option("--output", "-o", metavar="FILE", help="Write the result to FILE instead of stdout.")(f)
    return click.option(
        "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
        help="Output format: table (fitted to a terminal; in full on a pipe), csv, json, parquet (needs --output "
        "or a pipe).",
    )(f)


def scope_options(f: Callable, *, with_node: bool = True) -> Callable:
    f = click.option("--profiler", type=click.Choice(PROFILERS), help="Only this profiler's data.")(f)
    if with_node:
        f = click.option(
            "--node", metavar="ID", help="Only this node; 'any' = the first node, as smdebug's node_id='any'."
        )(f)
    f = click.option("--all-jobs", is_flag=True, help="Use every job in the store.")(f)
    return click.option("--job", metavar="ID", help="The training job (needed when the store holds several).")(f)


class OneLineUsageError(click.UsageError):
    """A usage error click found (unknown option or command, missing argument, bad value), shown as the one
    line every proflake error is (``proflake: error: ...``), pointing at the command's --help, instead of
    click's usage, hint and error lines. Exit code 2 (ExitCode.USAGE), as click's."""

    def __init__(self, error: click.UsageError) -> None:
        super().__init__(error.format_message(), error.ctx)

    def format_message(self) -> str:
        command = self.ctx.command_path if self.ctx is not None else "proflake"
        return f"{one_sentence(self.message)}; see '{command} --help'"

    def __str__(self) -> str:
        return self.format_message()

    def show(self, file: Any = None) -> None:
        from proflake.numbers import printable

        click.echo(printable(f"proflake: error: {self.format_message()}"), file=file if file is not None else sys.stderr)


def one_sentence(message: str) -> str:
    """Click's message as one line in proflake's style: ``Missing option '--format'. Choose from:\n\tcsv,
    ...`` becomes ``missing option '--format'; choose from: csv, ...``."""
    import re

    text = " ".join(message.split())
    text = re.sub(r"\. \((\w)", lambda m: " (" + m[1].lower(), text)  # ". (Did you mean" -> " (did you mean"
    text = re.sub(r"\. Did you mean ([^?]*)\?", r" (did you mean \1?)", text)
    text = re.sub(r"\. ([A-Z])(?=[a-z])", lambda m: "; " + m[1].lower(), text)  # ". Choose from" -> "; choose from"
    text = text.rstrip(".")
    if len(text) > 1 and text[0].isupper() and text[1].islower():
        text = text[0].lower() + text[1:]
    return text


def _one_line(error: click.UsageError) -> click.UsageError:
    if isinstance(error, OneLineUsageError):
        return error
    if isinstance(error, click.exceptions.NoArgsIsHelpError):
        ctx = error.ctx
        # ``proflake`` alone shows its help, as click does; ``proflake fetch`` alone names its commands.
        if ctx is None or ctx.parent is None or not isinstance(ctx.command, click.Group):
            return error
        names = ", ".join(ctx.command.list_commands(ctx))
        return OneLineUsageError(click.UsageError(f"missing command; expected one of: {names}", ctx))
    return OneLineUsageError(error)


class ProflakeGroup(click.Group):
    """Turns proflake's errors into one line on stderr and a documented exit code, for every command.

    ``lazy_commands`` (command -> module of proflake.cli) names commands whose module is imported only
    when the command is asked for (proflake.cli.COMMANDS)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands: dict[str, str] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            import importlib

            importlib.import_module(f"proflake.cli.{self.lazy_commands[cmd_name]}")
        return super().get_command(ctx, cmd_name)

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as e:  # this group's own options: proflake --bogus
            raise _one_line(e) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as e:  # a command's arguments and options, as click parses them
            raise _one_line(e) from None
        except ProflakeError as e:
            say(f"proflake: error: {e}")
            _exit_now_if_abandoned(e, e.exit_code)
            ctx.exit(e.exit_code)
        except BrokenPipeError:
            sys.stderr.close()
            ctx.exit(ExitCode.OK)
        except Terminated as e:
            say(f"proflake: stopped by {e.name}; the writer lock is released and nothing half-written is visible")
            ctx.exit(e.exit_code)
        except KeyboardInterrupt as e:
            say("proflake: interrupted (Ctrl-C)")
            _exit_now_if_abandoned(e, ExitCode.INTERRUPTED)
            ctx.exit(ExitCode.INTERRUPTED)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except Exception as e:
            # A library's own error (DuckDB, deltalake/object_store, boto3, the OS) that no layer below
            # named: one sentence, never a traceback. Anything else is a bug and keeps its traceback.
            from proflake.store.faults import explain

            explained = explain(e)
            if explained is None:
                raise
            say(f"proflake: error: {explained}")
            ctx.exit(explained.exit_code)


def scope_options_without_node(f: Callable) -> Callable:
    return scope_options(f, with_node=False)


@click.group(cls=ProflakeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="proflake")
def cli() -> None:
    """proflake: smdebug Python profiling stats as Delta Lake tables, queried with DuckDB SQL."""


def _exit_now_if_abandoned(error: BaseException, code: int) -> None:
    """A query DuckDB would not let go of (proflake.query.bounded) still runs on its thread, and a normal
    exit would wait for it: the command was read-only, so end the process now, output flushed."""
    if getattr(error, "abandoned", False):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(int(code))
