"""The README's papermill example runs in a fresh copy of the repository and leaves it clean
(issue 20, item 3): no ``build/`` yet, no runs table (notebook 02 never ran), the hardware list
given with ``-p`` as text, a model other than the paper's; the outputs go to the notebook's own
folder under ``build/out/``, and ``git status`` shows nothing changed (``paper/`` untouched).

The command is the README's own line, read from README.md; only the kernel differs: the
``hgresearch`` kernel registered by ``make install`` starts in the repository it was installed
from, so the copy runs on ``python3`` (this interpreter) started in the copy.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from hgresearch.paths import REPO_ROOT

pytestmark = pytest.mark.slow


def _readme_command() -> list[str]:
    """The README's papermill line (after ``mkdir -p ... &&``), split as a shell would."""
    [line] = [ln for ln in (REPO_ROOT / "README.md").read_text().splitlines()
              if "papermill notebooks/03_cost_performance.ipynb" in ln]
    mkdir, _, command = line.partition("&&")
    assert mkdir.strip().startswith("mkdir -p build"), line
    return shlex.split(command)


def _fresh_copy(target: Path) -> Path:
    """The repository's tracked files (as `git clone` would give them, with this working
    tree's edits) in a new git repository with one commit."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = REPO_ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=target, check=True)
    subprocess.run([*git, "add", "-A"], cwd=target, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "fresh"], cwd=target, check=True)
    return target


def test_readme_papermill_example_runs_in_a_fresh_clone(tmp_path: Path,
                                                        reference_dir: Path) -> None:
    repo = _fresh_copy(tmp_path / "repo")
    assert not (repo / "build").exists()
    command = _readme_command()
    assert command[0].endswith("papermill")
    env = {**os.environ, "PYTHONPATH": str(repo), "HGRESEARCH_REFERENCE_DIR": str(reference_dir)}
    (repo / "build" / "out").mkdir(parents=True)  # the README's `mkdir -p build/out`
    result = subprocess.run(
        [sys.executable, "-m", "papermill", *command[1:], "--kernel", "python3",
         "--cwd", str(repo), "--no-progress-bar"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = repo / "build" / "out" / "03_cost_performance"
    table2 = pd.read_csv(out / "tables" / "table2_cost_performance.csv")
    assert set(table2.Hardware) == {"1x H100-PCIe", "2x RTX-4090", "4x RTX-4090"}
    assert (out / "figures" / "figure1_scaling.png").is_file()
    assert (repo / "build" / "runs.parquet").is_file()  # built, since 02 never ran
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True,
                            text=True, check=True).stdout
    assert status == "", status
