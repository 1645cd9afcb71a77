"""Ctrl-C in a process map frees the workers at once (issue 20, item 1): it used to wait for
every item a worker held — a calibration each, tens of seconds — before anything stopped."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from hgresearch.executors import Executor, ExecutorKind


def _item(arg: tuple[int, str]) -> int:
    """Item 0 returns at once; item 1 works 20 s, then leaves a marker file."""
    index, marker = arg
    if index == 1:
        time.sleep(20)
        Path(marker).write_text("finished")
    return index


def test_ctrl_c_in_a_process_map_ends_the_workers_without_finishing_their_items(tmp_path):
    marker = tmp_path / "finished"

    def interrupt(result: int) -> None:  # Ctrl-C as the first result comes back
        raise KeyboardInterrupt

    # Children another test of this process left behind are not this test's business.
    before = {child.pid for child in multiprocessing.active_children()}
    executor = Executor(ExecutorKind.PROCESS, max_workers=2)
    with pytest.raises(KeyboardInterrupt):
        executor.map(_item, [(0, str(marker)), (1, str(marker))], on_result=interrupt)
    ours = [c for c in multiprocessing.active_children() if c.pid not in before]
    # SIGTERM was sent; give the workers time to die (join can return early here: the pool
    # has already closed the process sentinels), then none may be left.
    deadline = time.monotonic() + 10
    while any(c.is_alive() for c in ours) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [c for c in ours if c.is_alive()]
    assert not marker.exists()  # the 20-s item was stopped, not waited for
