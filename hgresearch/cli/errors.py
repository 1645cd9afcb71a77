"""The command line's one error handler.

Every command is registered (:data:`hgresearch.cli.COMMANDS`) behind :func:`handle_errors`:
an error the user can act on (:class:`~hgresearch.errors.HgResearchError`, a missing or existing
file) becomes one line ``error: …`` on stderr and the exit code the error carries — 2 for bad
input everywhere, 1 for a failure during the work — with no traceback. Anything else is a bug
and keeps its traceback.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import ParamSpec, TextIO, TypeVar

import typer

from hgresearch.errors import HgResearchError

BAD_INPUT_EXIT_CODE = 2
INTERRUPTED_EXIT_CODE = 130

P = ParamSpec("P")
R = TypeVar("R")


def one_line(err: BaseException) -> str:
    """The error's message (an OSError as ``path: reason``; a server failure keeps its log tail
    on the lines after the first)."""
    text = str(err).strip()
    if isinstance(err, OSError) and err.filename is not None and err.strerror:
        text = f"{err.filename}: {err.strerror}"
    return text


def fail(message: str, exit_code: int = BAD_INPUT_EXIT_CODE) -> typer.Exit:
    """Print ``error: message`` to stderr and return the exit to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(exit_code)


def show_warning_line(message: Warning | str, category: type[Warning], filename: str,
                      lineno: int, file: TextIO | None = None, line: str | None = None) -> None:
    """:func:`warnings.showwarning` for a command: ``warning: message`` on one line of stderr,
    without Python's file, line number, category and source line (NVML absent, a client that
    fell behind, ... are the user's news, not the code's)."""
    typer.echo(f"warning: {message}", err=True)


def handle_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Run a command; report user-facing errors as one line with their exit code, and
    warnings as one line each (:func:`show_warning_line`)."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        previous = warnings.showwarning
        warnings.showwarning = show_warning_line
        try:
            return func(*args, **kwargs)
        except HgResearchError as err:
            raise fail(one_line(err), err.exit_code) from None
        except (FileNotFoundError, FileExistsError, IsADirectoryError,
                NotADirectoryError) as err:
            raise fail(one_line(err), BAD_INPUT_EXIT_CODE) from None
        except KeyboardInterrupt:
            raise fail("interrupted", INTERRUPTED_EXIT_CODE) from None
        finally:
            warnings.showwarning = previous

    return wrapper
