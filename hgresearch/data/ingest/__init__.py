"""Read benchmark results into the **runs** table (one row per benchmark run) and, where a
file has per-request data, the **requests** table (see docs/tables.md).

Formats (one module each): vLLM's serving benchmark and hgresearch's ``summary.json``
(:mod:`.vllm`), guidellm reports (:mod:`.guidellm`), aiperf exports (:mod:`.aiperf`);
finding files, de-duplication and the tables: :mod:`.runs`; shared checks: :mod:`.common`.
"""

from hgresearch.data.ingest.common import (
    FOLDER_SIDECAR,
    RUN_COLUMNS,
    RUN_LATENCY_METRICS,
    SIDECAR_SUFFIX,
    Hardware,
    SkippedLine,
    parse_hardware_label,
)
from hgresearch.data.ingest.runs import (
    REQUESTS_TABLE_COLUMNS,
    Ingested,
    discover,
    finalize_runs,
    read_result_file,
    read_runs,
    read_tables,
    repeat_spread,
    result_files,
    select_repeats,
)
from hgresearch.data.ingest.vllm import (
    FILENAME_PATTERN,
    OPTIONAL_NUMERIC,
    REQUIRED_FIELDS,
    parse_filename,
    parse_record,
)
from hgresearch.data.summary import STATS
from hgresearch.identity import POINT_KEYS, hardware_label

__all__ = [
    "FILENAME_PATTERN", "FOLDER_SIDECAR", "RUN_LATENCY_METRICS", "OPTIONAL_NUMERIC", "POINT_KEYS",
    "REQUESTS_TABLE_COLUMNS", "REQUIRED_FIELDS", "RUN_COLUMNS", "SIDECAR_SUFFIX", "STATS",
    "Hardware", "Ingested", "SkippedLine", "discover", "finalize_runs", "hardware_label",
    "parse_filename", "parse_hardware_label", "parse_record", "read_result_file", "read_runs",
    "read_tables", "repeat_spread", "result_files", "select_repeats",
]
