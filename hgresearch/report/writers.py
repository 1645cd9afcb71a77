"""Deterministic writers: data frames to CSV/Parquet, publication tables to CSV, Markdown and
LaTeX (booktabs) with fixed rounding, and a notebook's headline numbers.

A publication table is data (:class:`TableSpec`: file stem, caption, label, columns, rounding,
notes); :func:`write_tables` writes every table of a notebook from its specs, so the notebooks
hold no captions or decimals. :func:`write_headline` records the numbers ``hgresearch
reproduce`` prints (:func:`headline_path` says where; the pipeline reads them there).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
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


#: The runs table notebook 02_ingest writes into the build folder.
RUNS_TABLE = "runs.parquet"


def runs_table(build_dir: str | Path, reference_dir: str | Path | None = None,
               echo: Callable[[str], object] = print) -> pd.DataFrame:
    """The reference runs table ``<build_dir>/runs.parquet`` that notebook 02_ingest writes;
    where it is missing (a fresh clone, a notebook run on its own) it is built as 02_ingest
    builds it — the reference data (verified; ``reference_dir`` or the lookup order), read
    and written there — and a line says so, instead of a Parquet reader's traceback."""
    from hgresearch.data import ingest, reference

    path = Path(build_dir) / RUNS_TABLE
    if path.is_file():
        return read_frame(path)
    source = reference.reference_dir("ionet-aibc2025", reference_dir or None)
    echo(f"{path} is missing (notebook 02_ingest writes it): building it from {source}")
    runs = ingest.read_runs(source, relative_to=source)
    write_frame(runs, path)
    return runs


def _fmt(value: object, decimals: int | None) -> str:
    """One cell as printed: ``—`` for a missing value, floats to ``decimals`` places."""
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


@dataclass(frozen=True)
class TableSpec:
    """One publication table as data: what :func:`write_table` needs besides the frame.

    ``stem`` is the file name under the tables folder (and the key of the frame handed to
    :func:`write_tables`); ``columns`` the columns shown, in order (empty: every column).
    ``caption`` and each note are templates filled with :meth:`str.format` from the context
    :func:`write_tables` is given (``"{model}"``, ``"{utilisation:.0%}"``); a note that comes
    out empty is left out.
    """

    stem: str
    caption: str
    label: str
    decimals: Mapping[str, int] = field(default_factory=dict)
    default_decimals: int = 2
    notes: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()


def write_tables(frames: Mapping[str, pd.DataFrame | None], specs: Iterable[TableSpec],
                 tables_dir: str | Path,
                 context: Mapping[str, object] | None = None) -> list[Path]:
    """Write the frame of every spec (``frames[spec.stem]``) with :func:`write_table` to
    ``tables_dir``, in the order of ``specs``; returns the written paths.

    A frame that is ``None`` is skipped (a table the notebook's parameters leave out); a spec
    without a frame, or a frame without a spec, is a :class:`KeyError` naming it.
    """
    specs = list(specs)
    unknown = sorted(set(frames) - {spec.stem for spec in specs})
    if unknown:
        raise KeyError(f"no table spec for {unknown}")
    context = context or {}
    written: list[Path] = []
    for spec in specs:
        if spec.stem not in frames:
            raise KeyError(f"no frame for the table {spec.stem!r}")
        frame = frames[spec.stem]
        if frame is None:
            continue
        notes = [text for text in (note.format(**context) for note in spec.notes) if text]
        written += write_table(frame[list(spec.columns)] if spec.columns else frame,
                               Path(tables_dir) / spec.stem,
                               caption=spec.caption.format(**context), label=spec.label,
                               decimals=spec.decimals, default_decimals=spec.default_decimals,
                               notes=notes or None)
    return written


def headline_path(build_dir: str | Path, name: str) -> Path:
    """Where :func:`write_headline` records the numbers of notebook ``name``."""
    return Path(build_dir) / "headline" / f"{name}.json"


def write_headline(build_dir: str | Path, name: str, numbers: Mapping[str, object]) -> Path:
    """Record a notebook's headline numbers; ``hgresearch reproduce`` prints them at the end.

    ``name`` is the notebook's file name without ``.ipynb``: ``reproduce`` reads the numbers of
    the notebooks it ran by that name (and removes them before the notebook runs again)."""
    path = headline_path(build_dir, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(numbers), indent=1, default=str) + "\n")
    return path
