"""Error types shared by the library; every input error names its file, line and field."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input data: names the file, the (1-based) line and the field, and what was expected."""

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
