"""What every command shares: the store and output options, error handling, stdout and stderr."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pyarrow as pa

from proflake.errors import ExitCode, ProflakeError
from proflake.query.profiles import PROFILERS
from proflake.render.output import FORMATS, render
from proflake.sources.settings import S3Config
from proflake.store.store import Store, default_store_location


def say(message: str) -> None:
    click.echo(message, err=True)


def emit(table: pa.Table, fmt: str, output: str | None) -> None:
    data = render(table, fmt)
    if output:
        try:
            Path(output).write_bytes(data)
        except OSError as e:
            raise ProflakeError(f"cannot write {output!r}: {e.strerror}") from e
        say(f"wrote {table.num_rows} row(s) to {output}")
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


# -- shared options ----------------------------------------------------------------------------------
def store_option(f: Callable) -> Callable:
    """--store, plus the S3 settings a store or source on S3 may need; hands the command a Store."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
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


def output_options(f: Callable) -> Callable:
    f = click.option("--output", "-o", metavar="FILE", help="Write the result to FILE instead of stdout.")(f)
    return click.option(
        "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True, help="Output format."
    )(f)


def scope_options(f: Callable, *, with_node: bool = True) -> Callable:
    f = click.option("--profiler", type=click.Choice(PROFILERS), help="Only this profiler's data.")(f)
    if with_node:
        f = click.option(
            "--node", metavar="ID", help="Only this node; 'any' = the first node, as smdebug's node_id='any'."
        )(f)
    f = click.option("--all-jobs", is_flag=True, help="Use every job in the store.")(f)
    return click.option("--job", metavar="ID", help="The training job (needed when the store holds several).")(f)


class ProflakeGroup(click.Group):
    """Turns proflake's errors into one line on stderr and a documented exit code, for every command."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ProflakeError as e:
            say(f"proflake: error: {e}")
            ctx.exit(e.exit_code)
        except BrokenPipeError:
            sys.stderr.close()
            ctx.exit(ExitCode.OK)


def scope_options_without_node(f: Callable) -> Callable:
    return scope_options(f, with_node=False)




@click.group(cls=ProflakeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="proflake")
def cli() -> None:
    """proflake: smdebug Python profiling stats as Delta Lake tables, queried with DuckDB SQL."""
