"""Error types shared by the library.

Every error a user can cause or fix derives from :class:`HgResearchError`; the command line
(:mod:`hgresearch.cli.errors`) prints such an error as one line and exits with its
``exit_code`` — 2 for bad input (:class:`InputError`), 1 for a failure during the work — and
never shows a traceback for them.
"""

from __future__ import annotations


class HgResearchError(Exception):
    """An error the user can act on; the CLI prints it as one line and exits ``exit_code``."""

    exit_code: int = 1


class InputError(HgResearchError, ValueError):
    """Bad input data: names the file, the (1-based) line and the field, and what was expected."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.reason = message
        where = []
        if file is not None:
            where.append(str(file) + (f":{line}" if line is not None else ""))
        if field is not None:
            where.append(f"field '{field}'")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)
