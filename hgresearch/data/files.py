"""Reading the project's text inputs — YAML files and JSON Lines — with errors that name the
file and line (one definition; sweep files, fleet files, run folders, result files and prompt
files all read through here).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hgresearch.errors import InputError


def read_text(path: str | Path, *, what: str = "file") -> str:
    """The file's UTF-8 text; a missing file or other bytes are an :class:`InputError`."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} not found", file=str(path)) from None
    except IsADirectoryError:
        raise InputError(f"expected a {what}, found a folder", file=str(path)) from None
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text (byte {err.start})", file=str(path)) from None


@dataclass
class YamlDocument:
    """A parsed YAML file with the line of every key and item (for errors)."""

    data: Any
    #: The file (None for content that came from elsewhere, e.g. built in code).
    file: str | None
    #: 1-based line of each key path (``("servers", 0, "gpu_name")``); ``()`` is the root.
    lines: dict[tuple[Any, ...], int] = field(default_factory=dict)

    def line_of(self, *where: Any) -> int | None:
        """The line of ``where`` or of its nearest enclosing key that has one."""
        for n in range(len(where), -1, -1):
            line = self.lines.get(tuple(where[:n]))
            if line is not None:
                return line
        return None

    def error(self, message: str, *where: Any) -> InputError:
        """An :class:`InputError` naming this file, the line of ``where`` and the field path
        (``servers[0].gpu_name``)."""
        return InputError(message, file=self.file, line=self.line_of(*where),
                          field=field_path(where) or None)


def field_path(where: tuple[Any, ...]) -> str:
    """``("servers", 0, "gpu_name")`` -> ``servers[0].gpu_name``."""
    text = ""
    for part in where:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _node_lines(node: yaml.Node, path: tuple[Any, ...], out: dict[tuple[Any, ...], int]) -> None:
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            child = (*path, key.value)
            _node_lines(value, child, out)
            out[child] = key.start_mark.line + 1  # a key's own line, also for nested values
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _node_lines(item, (*path, i), out)


def read_yaml(path: str | Path, *, what: str = "YAML file") -> YamlDocument:
    """Parse a YAML file; malformed YAML is an :class:`InputError` with the line it breaks."""
    path = Path(path)
    text = read_text(path, what=what)
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise InputError(f"malformed YAML: {getattr(err, 'problem', err)}", file=str(path),
                         line=mark.line + 1 if mark else None) from None
    lines: dict[tuple[Any, ...], int] = {}
    if root is not None:
        _node_lines(root, (), lines)
    return YamlDocument(data=data, file=str(path), lines=lines)


def iter_json_lines(path: str | Path, *, text: str | None = None,
                    tolerate_truncated_last: bool = False) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of every non-blank line of a JSON Lines file.

    A line that is not JSON is an :class:`InputError` naming the file and line; with
    ``tolerate_truncated_last`` an unparsable *last* line without a newline after it (a writer
    killed mid-line) is skipped instead. ``text`` avoids reading the file again.
    """
    path = Path(path)
    text = read_text(path) if text is None else text
    lines = text.split("\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as err:
            if tolerate_truncated_last and number == len(lines):
                continue
            raise InputError(f"malformed JSON: {err.msg} at column {err.colno}",
                             file=str(path), line=number) from None
        yield number, value


def parameter_list(value: Any, name: str) -> list[Any]:
    """A notebook's list parameter as a list, however it came (the one place notebooks parse
    them): a list (the default, papermill ``-y``/``-f``) as it is; text (papermill ``-p``
    passes every value as text) as a YAML/JSON list (``'["1x H100-PCIe", "2x RTX-4090"]'``,
    ``'[32, 16, 8]'``), else as comma-separated items (``'1x H100-PCIe,2x RTX-4090'``; one
    item without commas is a list of one). :class:`InputError` naming the parameter otherwise:
    a list read item by item from its text would be looked up one character at a time."""
    if isinstance(value, list | tuple):
        return list(value)
    if not isinstance(value, str):
        raise InputError(f"expected a list, got {value!r}", field=name)
    text = value.strip()
    if text.startswith("["):
        try:
            parsed = yaml.safe_load(text)
        except yaml.YAMLError as err:
            problem = str(err).splitlines()[0]
            raise InputError(f"expected a list such as '[\"a\", \"b\"]', got {value!r} "
                             f"({problem})", field=name) from None
        if not isinstance(parsed, list):
            raise InputError(f"expected a list, got {value!r}", field=name)
        return parsed
    return [_item(item.strip()) for item in text.split(",") if item.strip()]


def _item(text: str) -> Any:
    """One comma-separated item: a JSON number or literal where it is one (``16``, ``2.5``),
    else the text (``1x H100-PCIe``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
