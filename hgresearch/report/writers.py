"""Deterministic table writers: data frames to CSV/Parquet, and publication tables to
CSV, Markdown and LaTeX (booktabs) with fixed rounding."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from hgresearch.errors import InputError

#: Data-table formats :func:`write_frame` writes, by suffix.
FRAME_SUFFIXES = (".csv", ".parquet")


def check_frame_path(path: str | Path) -> Path:
    """``path`` if :func:`write_frame` can write it, else an :class:`InputError` naming it
    (check before the work whose result it will hold)."""
    path = Path(path)
    if path.suffix not in FRAME_SUFFIXES:
        raise InputError(f"unsupported table format {path.suffix or '(no suffix)'!r} "
                         f"(use {' or '.join(FRAME_SUFFIXES)})", file=str(path))
    return path


def write_frame(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write a data table as ``.csv`` or ``.parquet`` (chosen by suffix; any other suffix is an
    :class:`~hgresearch.errors.InputError`)."""
    path = check_frame_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False, lineterminator="\n")
    return path


def read_frame(path: str | Path) -> pd.DataFrame:
    """Read a table written by :func:`write_frame`."""
    path = Path(path)
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)


def _fmt(value: object, decimals: int | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float) and decimals is not None:
        return f"{value:,.{decimals}f}".replace(",", "")
    return str(value)


def format_table(frame: pd.DataFrame, decimals: Mapping[str, int] | None = None,
                 default_decimals: int = 2) -> pd.DataFrame:
    """Strings rounded as a paper prints them: ``decimals`` per column, else the default."""
    decimals = dict(decimals or {})
    out = pd.DataFrame(index=frame.index)
    for column in frame.columns:
        places = decimals.get(column, default_decimals)
        out[column] = [_fmt(v, places) for v in frame[column]]
    return out


def _latex_escape(text: str) -> str:
    for char, repl in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("$", r"\$"),
                       ("#", r"\#"), ("_", r"\_"), ("{", r"\{"), ("}", r"\}"), ("—", "--")):
        text = text.replace(char, repl)
    return text


def write_table(frame: pd.DataFrame, stem: str | Path, *, caption: str, label: str,
                decimals: Mapping[str, int] | None = None, default_decimals: int = 2,
                notes: list[str] | None = None) -> list[Path]:
    """Write ``<stem>.csv`` (full precision), ``<stem>.md`` and ``<stem>.tex`` (rounded).

    Returns the written paths. Output is byte-stable for the same input.
    """
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    csv_path = stem.with_suffix(".csv")
    frame.to_csv(csv_path, index=False, lineterminator="\n", float_format="%.6g")
    shown = format_table(frame, decimals, default_decimals)
    header = [str(c) for c in shown.columns]
    md = [f"**{caption}**", "", "| " + " | ".join(header) + " |",
          "|" + "|".join("---:" if pd.api.types.is_numeric_dtype(frame[c]) else "---"
                         for c in frame.columns)
          + "|"]
    md += ["| " + " | ".join(row) + " |" for row in shown.astype(str).values.tolist()]
    for note in notes or []:
        md += ["", f"*{note}*"]
    md_path = stem.with_suffix(".md")
    md_path.write_text("\n".join(md) + "\n", encoding="utf-8")
    align = "".join("l" if not pd.api.types.is_numeric_dtype(frame[c]) else "r"
                    for c in frame.columns)
    tex = [r"\begin{table}[t]", r"\centering", rf"\caption{{{_latex_escape(caption)}}}",
           rf"\label{{{label}}}", r"\small", rf"\begin{{tabular}}{{{align}}}", r"\toprule",
           " & ".join(_latex_escape(h) for h in header) + r" \\", r"\midrule"]
    tex += [" & ".join(_latex_escape(v) for v in row) + r" \\"
            for row in shown.astype(str).values.tolist()]
    tex += [r"\bottomrule", r"\end{tabular}"]
    for note in notes or []:
        tex.append(rf"\par\footnotesize {_latex_escape(note)}")
    tex.append(r"\end{table}")
    tex_path = stem.with_suffix(".tex")
    tex_path.write_text("\n".join(tex) + "\n", encoding="utf-8")
    return [csv_path, md_path, tex_path]
