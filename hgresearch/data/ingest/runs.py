"""Find result files, read each in its format, and build the runs and requests tables.

Formats are told apart by content, never by file name: a guidellm report (:mod:`.guidellm`),
an aiperf export (:mod:`.aiperf`), vLLM's (or hgresearch's) summary record (:mod:`.vllm`);
each reader tells the tool version (or the range of versions whose layout the file has) into
``source_version``, and a layout it does not know is one error naming the tool, the version
found and the versions read. JSON that is none of these is "not a recognised format". A file
holds one JSON object, or JSON Lines with one run per line (vLLM's ``--append-result``). Errors
name the file, the 1-based line and the field; with ``on_error="skip"`` a bad line (or a whole
bad file, listed as line 0) is left out and listed in one warning.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from hgresearch.data.files import iter_json_lines
from hgresearch.data.ingest import aiperf, guidellm
from hgresearch.data.ingest.common import (
    FOLDER_SIDECAR,
    RUN_COLUMNS,
    SIDECAR_SUFFIX,
    Hardware,
    SkippedLine,
    not_recognised_error,
    parse_hardware_label,
    sidecar_hardware,
)
from hgresearch.data.ingest.vllm import (
    check_filename,
    is_vllm_record,
    parse_filename,
    parse_vllm_record,
)
from hgresearch.data.runfolder import (
    CONFIG_FILE,
    ERROR_FILE,
    REQUEST_COLUMNS,
    REQUESTS_FILE,
    SERVER_METRICS_FILE,
    SUMMARY_FILE,
)
from hgresearch.errors import InputError
from hgresearch.identity import POINT_KEYS

#: An hgresearch run folder holds one of these; only its ``summary.json`` is a result.
RUN_FOLDER_MARKERS = (SUMMARY_FILE, REQUESTS_FILE)
#: JSON files that are never results: run-folder parts, sidecars, other tools' side files.
NOT_RESULTS = {CONFIG_FILE, REQUESTS_FILE, ERROR_FILE, SERVER_METRICS_FILE, "status.jsonl",
               FOLDER_SIDECAR, aiperf.RECORDS_FILE, "inputs.json",
               "PROVENANCE.json"}  # the last: beside the tools' files in tests/data/tools
NOT_RESULT_SUFFIXES = (SIDECAR_SUFFIX, ".pytorch.json")

#: Columns of the ingested requests table: the run it belongs to, then our requests columns.
REQUESTS_TABLE_COLUMNS = ["run_id", *REQUEST_COLUMNS]


@dataclass
class Ingested:
    """What :func:`read_tables` read."""

    runs: pd.DataFrame
    #: One row per request of every run whose file has per-request data
    #: (:data:`REQUESTS_TABLE_COLUMNS`); empty when none has.
    requests: pd.DataFrame
    #: Files that gave at least one run (a file whose every run failed is not listed here).
    files_read: list[Path] = field(default_factory=list)
    #: Files skipped whole or in part (``on_error="skip"``), each listed once.
    files_failed: list[Path] = field(default_factory=list)
    #: JSON files found in folders but not read as results (run-folder parts, sidecars, ...).
    files_ignored: list[Path] = field(default_factory=list)
    skipped: list[SkippedLine] = field(default_factory=list)
    #: ``(duplicate, first)`` locations (``file:line``) of runs given more than once.
    duplicates: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class _Parsed:
    row: dict[str, Any]
    requests: pd.DataFrame | None
    content_hash: str


def _is_result_name(path: Path) -> bool:
    return (path.suffix in (".json", ".jsonl") and path.name not in NOT_RESULTS
            and not path.name.endswith(NOT_RESULT_SUFFIXES) and not path.name.startswith("."))


def discover(directory: str | Path) -> tuple[list[Path], list[Path]]:
    """(result files, other JSON files) under ``directory``, recursively, sorted by path.

    An hgresearch run folder (one holding ``summary.json`` or ``requests.jsonl``) contributes
    only its ``summary.json``; folders named ``_*`` or ``.*`` (a sweep's own records) are not
    entered.
    """
    directory = Path(directory)
    if not directory.exists():
        raise InputError("no such file or folder", file=str(directory))
    if not directory.is_dir():
        raise InputError("not a directory", file=str(directory))
    results: list[Path] = []
    ignored: list[Path] = []

    def walk(folder: Path) -> None:
        entries = sorted(folder.iterdir())
        if any((folder / marker).is_file() for marker in RUN_FOLDER_MARKERS):
            results.extend(p for p in entries if p.name == SUMMARY_FILE and p.is_file())
            return
        for entry in entries:
            if entry.is_dir():
                if not entry.name.startswith(("_", ".")):
                    walk(entry)
            elif entry.suffix in (".json", ".jsonl"):
                (results if _is_result_name(entry) else ignored).append(entry)

    walk(directory)
    return sorted(results), sorted(ignored)


def result_files(directory: str | Path) -> list[Path]:
    """Result files under ``directory`` (see :func:`discover`)."""
    return discover(directory)[0]


def _fail(err: InputError, on_error: str, skipped: list[SkippedLine] | None, file: str,
          line: int) -> None:
    if on_error == "raise":
        raise err
    if on_error != "skip":
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if skipped is not None:
        skipped.append(SkippedLine(file, line, str(err)))


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _load_records(path: Path, *, on_error: str, skipped: list[SkippedLine] | None
                  ) -> list[tuple[int, Any]]:
    """The JSON documents of a file with their 1-based lines."""
    file = str(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        _fail(InputError(f"not a UTF-8 text file (binary?): byte {err.start} cannot be decoded",
                         file=file), on_error, skipped, file, 0)
        return []
    except OSError as err:
        _fail(InputError(f"cannot read: {err.strerror}", file=file), on_error, skipped, file, 0)
        return []
    if not text.strip():
        _fail(InputError("file is empty (expected one JSON object per line)", file=file),
              on_error, skipped, file, 0)
        return []
    records: list[tuple[int, Any]] = []
    # One pretty-printed object spans several lines; JSON Lines holds one object per line.
    if text.lstrip().startswith("{") and "\n" in text.strip() and not _is_json_lines(text):
        try:
            records = [(1, json.loads(text))]
        except json.JSONDecodeError as err:
            _fail(InputError(f"malformed JSON: {err.msg}", file=file, line=err.lineno),
                  on_error, skipped, file, err.lineno)
        return records
    lines = text.split("\n")
    while True:  # one pass, restarted after each bad line when skipping
        try:
            for number, value in iter_json_lines(path, text="\n".join(lines)):
                records.append((number, value))
                lines[number - 1] = ""
            return records
        except InputError as err:
            _fail(InputError(f"{err.reason} (truncated line?)", file=file, line=err.line),
                  on_error, skipped, file, err.line or 0)
            lines[(err.line or 1) - 1] = ""


def _parse_file(path: Path, *, on_error: str, skipped: list[SkippedLine] | None,
                hardware: Hardware | None) -> list[_Parsed]:
    file = str(path)
    records = _load_records(path, on_error=on_error, skipped=skipped)
    if not records:
        return []
    option = hardware  # --hardware: only for records that name none
    try:
        sidecar = sidecar_hardware(path)
    except InputError as err:
        _fail(err, on_error, skipped, file, 0)
        return []
    hardware = sidecar or option
    if len(records) == 1 and guidellm.is_guidellm_report(records[0][1]):
        report = records[0][1]
        try:
            guidellm.check_report(report, file=file)
        except InputError as err:
            _fail(err, on_error, skipped, file, 0)
            return []
        if not report["benchmarks"]:
            _fail(InputError("report holds no benchmarks", file=file, field="benchmarks"),
                  on_error, skipped, file, 0)
        guidellm_runs = []
        for index, bench in enumerate(report["benchmarks"], start=1):
            try:
                row, requests = guidellm.parse_benchmark(bench, report, file=file, line=index,
                                                         hardware=hardware)
                guidellm_runs.append(_Parsed(row, requests, _hash(bench)))
            except InputError as err:
                _fail(err, on_error, skipped, file, index)
        return guidellm_runs
    if len(records) == 1 and aiperf.is_aiperf_export(records[0][1]):
        try:
            row, requests = aiperf.parse_export(records[0][1], file=file, hardware=hardware)
        except InputError as err:
            _fail(err, on_error, skipped, file, err.line or 1)
            return []
        return [_Parsed(row, requests, _hash(records[0][1]))]
    meta = parse_filename(path.name)
    parsed = []
    for number, record in records:
        try:
            if aiperf.is_aiperf_export(record) or guidellm.is_guidellm_report(record):
                raise InputError("a report of another tool inside JSON Lines; give it as a "
                                 "file of its own", file=file, line=number)
            if not is_vllm_record(record):
                raise not_recognised_error(record, file=file, line=number)
            row, requests = parse_vllm_record(record, file=file, line=number, hardware=sidecar,
                                              fallback_hardware=option)
            if meta is not None:
                check_filename(row, meta, file=file, line=number)
                if not row["dataset"]:
                    row["dataset"] = meta["dataset"]
            parsed.append(_Parsed(row, requests, _hash(record)))
        except InputError as err:
            _fail(err, on_error, skipped, file, number)
    return parsed


def read_result_file(
    path: str | Path, *, on_error: str = "raise", skipped: list[SkippedLine] | None = None,
    hardware: Hardware | str | None = None,
) -> list[dict[str, Any]]:
    """Rows of one result file (any format this package reads).

    ``on_error="skip"`` leaves bad lines out and appends them to ``skipped``;
    ``"raise"`` (default) raises :class:`InputError` at the first bad line.
    """
    if isinstance(hardware, str):
        hardware = parse_hardware_label(hardware, field="--hardware")
    return [p.row for p in _parse_file(Path(path), on_error=on_error, skipped=skipped,
                                       hardware=hardware)]


def _is_json_lines(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2:
        return True
    try:
        json.loads(lines[0])
        return True
    except json.JSONDecodeError:
        return False


def read_tables(
    paths: str | Path | Iterable[str | Path], *, on_error: str = "raise",
    relative_to: str | Path | None = None, hardware: Hardware | str | None = None,
) -> Ingested:
    """Build the runs and requests tables from result files and/or folders of them.

    Args:
        paths: files and folders (searched recursively, see :func:`discover`).
        on_error: ``"raise"`` (default) or ``"skip"``; skipped lines and files are listed in
            one warning.
        relative_to: store ``source_file`` relative to this folder (stable across machines).
        hardware: label such as ``"2x RTX-4090"`` for files that name no GPU; a file's
            hardware sidecar (see :data:`hgresearch.data.ingest.common.SIDECAR_SUFFIX`) wins.

    Raises:
        InputError: a missing path, a folder without result files, no run left to read, or
            (with ``on_error="raise"``) any bad file or line.

    The same run given twice (same content, e.g. a file and its copy, or a folder and its
    sub-folder) is kept once, with a warning: it is not a repeat.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if isinstance(hardware, str):
        hardware = parse_hardware_label(hardware, field="--hardware")
    files: list[Path] = []
    ignored: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found, other = discover(p)
            if not found:
                raise InputError("no result files (*.json, *.jsonl) in this folder or below",
                                 file=str(p))
            files.extend(found)
            ignored.extend(other)
        elif p.exists():
            files.append(p)
        else:
            raise InputError("no such file or folder", file=str(p))
    if not files:
        raise InputError("no result files or folders given")
    result = Ingested(runs=pd.DataFrame(), requests=pd.DataFrame(), files_ignored=ignored)
    seen: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    requests: dict[tuple[str, int], pd.DataFrame] = {}
    for file in files:
        skipped_before = len(result.skipped)
        parsed_runs = _parse_file(file, on_error=on_error, skipped=result.skipped,
                                  hardware=hardware)
        if len(result.skipped) > skipped_before and file not in result.files_failed:
            result.files_failed.append(file)
        for parsed in parsed_runs:
            row = parsed.row
            where = f"{row['source_file']}:{row['source_line']}"
            if parsed.content_hash in seen:
                result.duplicates.append((where, seen[parsed.content_hash]))
                continue
            seen[parsed.content_hash] = where
            if file.name == SUMMARY_FILE and not row["run_dir"]:
                row["run_dir"] = str(file.parent)
            if relative_to is not None:
                try:
                    row["source_file"] = str(Path(row["source_file"]).relative_to(relative_to))
                except ValueError:
                    pass
            rows.append(row)
            if parsed.requests is not None:
                requests[(row["source_file"], row["source_line"])] = parsed.requests
        if parsed_runs and file not in result.files_read:
            result.files_read.append(file)
    if result.skipped:
        listing = "\n".join(f"  {s.reason}" for s in result.skipped)
        warnings.warn(f"skipped {len(result.skipped)} bad line(s):\n{listing}", stacklevel=3)
    if result.duplicates:
        listing = "\n".join(f"  {dup} repeats {first}" for dup, first in result.duplicates)
        warnings.warn(f"ignored {len(result.duplicates)} run(s) given twice (same content):\n"
                      f"{listing}", stacklevel=3)
    if not rows:
        raise InputError("no runs to read: every line was skipped" if result.skipped
                         else "no runs in the files given", file=str(files[0]))
    table = pd.DataFrame(rows, columns=[c for c in RUN_COLUMNS if c not in
                                        ("run_id", "repeat_index", "repeat_count")])
    result.runs = finalize_runs(table)
    result.requests = _requests_table(result.runs, requests)
    return result


def _requests_table(runs: pd.DataFrame, frames: dict[tuple[str, int], pd.DataFrame]
                    ) -> pd.DataFrame:
    run_ids = {(f, int(line)): rid for f, line, rid in
               zip(runs.source_file, runs.source_line, runs.run_id, strict=True)}
    parts = [frame.assign(run_id=run_ids[key]) for key, frame in frames.items()
             if not frame.empty]
    if not parts:
        return pd.DataFrame(columns=REQUESTS_TABLE_COLUMNS)
    return pd.concat(parts, ignore_index=True)[REQUESTS_TABLE_COLUMNS]


def read_runs(
    paths: str | Path | Iterable[str | Path], *, on_error: str = "raise",
    relative_to: str | Path | None = None, hardware: Hardware | str | None = None,
) -> pd.DataFrame:
    """The runs table from result files and/or folders (see :func:`read_tables`).

    Returns:
        The runs table, columns :data:`RUN_COLUMNS`, sorted by model, hardware, rate, repeat.
        ``repeat_index`` numbers repeated runs of one operating point in file order (0 first).
    """
    return read_tables(paths, on_error=on_error, relative_to=relative_to,
                       hardware=hardware).runs


def finalize_runs(table: pd.DataFrame) -> pd.DataFrame:
    """Add ``run_id``, ``repeat_index``/``repeat_count`` and the documented column order."""
    table = table.sort_values(["source_file", "source_line"], kind="stable").reset_index(drop=True)
    point = table[POINT_KEYS].apply(lambda col: col.map(str)).agg("|".join, axis=1) \
        if len(table) else pd.Series([], dtype=str)
    table["repeat_index"] = point.groupby(point, sort=False).cumcount().astype(int)
    table["repeat_count"] = point.groupby(point, sort=False).transform("size").astype(int)
    # A run folder is named by its path; a result file by its stem and line.
    table["run_id"] = [str(Path(f).parent.as_posix()) if Path(f).name == SUMMARY_FILE
                       else f"{Path(f).stem}:{line}"
                       for f, line in zip(table.source_file, table.source_line, strict=True)]
    table = table.sort_values(["model", "gpu_name", "gpu_count", "request_rate_qps",
                               "repeat_index"], kind="stable").reset_index(drop=True)
    for column in ("gpu_count", "tensor_parallel_size", "replicas", "num_prompts", "completed",
                   "total_input_tok", "total_output_tok", "total_tok", "source_line"):
        table[column] = table[column].astype("int64")
    return table[RUN_COLUMNS]


def select_repeats(runs: pd.DataFrame, policy: str = "first") -> pd.DataFrame:
    """One row per operating point from repeated runs.

    ``"first"`` keeps the first run as listed in its file (the paper's tables appear to use it);
    ``"mean"`` averages numeric columns over repeats (``repeat_count`` says how many).
    ``"all"`` returns every run unchanged.
    """
    if policy == "all":
        return runs
    if policy == "first":
        return runs[runs.repeat_index == 0].reset_index(drop=True)
    if policy == "mean":
        numeric = [c for c in runs.columns if pd.api.types.is_numeric_dtype(runs[c])
                   and c not in POINT_KEYS and c not in ("repeat_index", "repeat_count")]
        # Missing keys (e.g. max_concurrency) must still group, so group on their text form.
        point = runs[POINT_KEYS].apply(lambda col: col.map(str)).agg("|".join, axis=1)
        means = runs[numeric].groupby(point).transform("mean")
        averaged = runs.copy()
        averaged[numeric] = means
        return averaged[averaged.repeat_index == 0].reset_index(drop=True)
    raise ValueError(f"repeat policy must be 'first', 'mean' or 'all', got {policy!r}")


def repeat_spread(runs: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Run-to-run spread of ``columns`` over repeated points: mean, std, min, max, n per point."""
    repeated = runs[runs.repeat_count > 1]
    return repeated.groupby(POINT_KEYS, dropna=False)[columns].agg(
        ["mean", "std", "min", "max", "count"])
