"""The Ray tests (``test_executors.py``, ``test_sweep_ray.py``) run in a pytest of their own,
one per module, when the whole suite runs.

Why: a Ray driver ends its own process at once, with exit status 1 and nothing written, when
its local raylet or GCS dies (Ray's core worker exits rather than run on without a node). In
the suite's process that ended the whole test run with no report: CI on 2026-12-03 stopped
13 tests in, during ``test_sim_validation_on_ray_gives_the_same_table_as_locally``, which
passes here in 0.8 s, in a fresh clone and in a full CI run. In a child pytest such a crash
is one failing test that shows the child's output and the tail of Ray's logs. A crash (the
child wrote no result file) is retried once and reported as a warning; a test that fails is
not retried.

Running a module directly (``pytest tests/integration/test_executors.py``) runs its tests in
that process, as before (``pytest_collection_modifyitems`` in conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import warnings
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from ray_isolation import RAY_CHILD_ENV, RAY_ISOLATED_MODULES

from hgresearch.paths import REPO_ROOT

pytestmark = pytest.mark.ray

#: Ray's log files whose tails a crash report shows (under <ray temp dir>/session_latest/logs).
RAY_LOGS = ("raylet.err", "raylet.out", "gcs_server.err", "gcs_server.out")
CHILD_TIMEOUT_S = 1800


#: What a Ray process that ended itself writes before its stack trace.
FATAL_MARKERS = ("Check failed", "FATAL", "*** SIG", "Aborted", "Traceback")


def ray_log_tails(lines: int = 15) -> str:
    """The last ``lines`` of each of :data:`RAY_LOGS`, of the driver's core-worker log and of
    each worker's stderr in the newest Ray session on this machine, each preceded by its lines
    with a :data:`FATAL_MARKERS` (a failed check's message comes before a stack trace longer
    than the tail): what a dead raylet, GCS, driver or worker said last."""
    logs = Path(os.environ.get("RAY_TMPDIR", tempfile.gettempdir())) / "ray" / \
        "session_latest" / "logs"
    files = [logs / name for name in RAY_LOGS] + sorted(logs.glob("python-core-driver-*.log")) \
        + sorted(logs.glob("worker-*.err"))
    parts = []
    for path in files:
        if path.is_file():
            text = path.read_text(errors="replace").splitlines()
            fatal = [line for line in text if any(marker in line for marker in FATAL_MARKERS)]
            if text:
                shown = [*fatal[-5:], "[...]", *text[-lines:]] if fatal else text[-lines:]
                parts.append(f"--- {path}\n" + "\n".join(shown))
    return "\n".join(parts) or f"(no Ray logs under {logs})"


def run_child(module: str, result_file: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, RAY_CHILD_ENV: "1"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         f"--junitxml={result_file}", module],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
        stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("module", RAY_ISOLATED_MODULES)
def test_ray_module_passes_in_a_pytest_of_its_own(module: str, tmp_path: Path) -> None:
    crashes = []
    for attempt in (1, 2):
        result_file = tmp_path / f"attempt{attempt}.xml"
        child = run_child(module, result_file)
        output = child.stdout + child.stderr
        if result_file.exists():
            break
        crashes.append(f"attempt {attempt}: exit status {child.returncode}, no result file\n"
                       f"{output[-4000:]}\n{ray_log_tails()}")
    else:
        pytest.fail(f"{module}: the child pytest crashed twice\n" + "\n\n".join(crashes))
    suite = ElementTree.parse(result_file).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    assert suite is not None, f"{module}: no testsuite in {result_file}"
    counts = {key: int(suite.get(key, "0")) for key in ("tests", "failures", "errors",
                                                         "skipped")}
    assert child.returncode == 0 and counts["failures"] == counts["errors"] == 0, \
        f"{module}: {counts}\n{output[-8000:]}"
    # CI installs Ray: there a skipped Ray test is a missing part, not a pass
    assert counts["tests"] > 0 and (not os.environ.get("CI") or counts["skipped"] == 0), \
        f"{module}: {counts}\n{output[-4000:]}"
    if crashes:
        warnings.warn(f"{module}: the child pytest crashed once and passed on the retry\n"
                      + crashes[0], RuntimeWarning, stacklevel=1)
