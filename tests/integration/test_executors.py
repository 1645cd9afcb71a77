"""Executors (local | process | ray): the same results in the same order on each; the
simulator's validation and the planner's capacity searches give the same tables on Ray as
locally. One local Ray cluster (2 CPUs) serves the whole module."""

from __future__ import annotations

import functools
import math
import sys
import time

import pandas as pd
import pytest
from typer.testing import CliRunner

from hgresearch.bench.sweep import qps_label
from hgresearch.errors import InputError
from hgresearch.executors import RAY_INSTALL_HINT, Executor, ExecutorKind
from hgresearch.paths import REPO_ROOT

pytestmark = pytest.mark.ray


def test_missing_ray_is_an_input_error_saying_how_to_install(monkeypatch) -> None:
    from hgresearch.cli import app

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(InputError, match=r"pip install 'hgresearch\[ray\]'"):
        Executor(ExecutorKind.RAY).map(qps_label, [1.0])
    result = CliRunner().invoke(app, ["sim", "validate", str(REPO_ROOT / "data/raw/cpu-tiny"),
                                      "--executor", "ray"])
    assert result.exit_code == 2 and RAY_INSTALL_HINT in result.output


def test_sim_validate_names_an_unknown_configuration() -> None:
    from hgresearch.cli import app

    result = CliRunner().invoke(app, ["sim", "validate", str(REPO_ROOT / "data/raw/cpu-tiny"),
                                      "--config", "nope on 1x CPU", "--executor", "local"])
    assert result.exit_code == 2
    assert "unknown configuration" in result.output and "tiny-llama-cpu on 1x CPU" in \
        result.output


def test_parse_refuses_unknown_kinds_and_an_address_without_ray() -> None:
    assert Executor.parse("ray", "auto") == Executor(ExecutorKind.RAY, "auto")
    with pytest.raises(InputError, match="unknown executor"):
        Executor.parse("slurm")
    with pytest.raises(InputError, match="--address is for --executor ray"):
        Executor.parse("process", "auto")
    assert Executor.for_jobs(1) == Executor() and \
        Executor.for_jobs(3) == Executor(ExecutorKind.PROCESS, max_workers=3)


def test_every_executor_returns_the_same_results_in_order(ray_cluster) -> None:
    items = [1.0, 0.5, math.inf, 32.0]
    expected = ["1", "0.5", "inf", "32"]
    for executor in (Executor(), Executor(ExecutorKind.PROCESS, max_workers=2),
                     Executor(ExecutorKind.RAY)):
        seen: list[str] = []
        assert executor.map(qps_label, items, on_result=seen.append) == expected, executor
        assert seen == expected


def test_a_failing_item_raises_its_own_error_on_ray(ray_cluster) -> None:
    """The item's InputError itself (exit 2 on the command line), not Ray's wrapper."""
    from hgresearch.bench.sweep import makespan_s

    with pytest.raises(InputError, match="expected at least one node"):
        Executor(ExecutorKind.RAY).map(functools.partial(makespan_s, [1.0]), [1, 0])


@pytest.mark.timing  # its bounds (30 s, against a 60 s sleeper) are wide, but on the clock
@pytest.mark.parametrize("ignores_interrupts", [False, True],
                         ids=["stops-on-interrupt", "ignores-interrupts"])
def test_a_failing_item_stops_the_map_and_the_cluster_serves_the_next_one(
        ray_cluster, ignores_interrupts: bool) -> None:
    """The first item fails at once while the second sleeps for a minute: the map raises
    the item's error without waiting for the sleeper; the sleeper is cancelled, gently or,
    when that does not stop it within CANCEL_GRACE_S (a gentle cancel that lands as the task
    starts is lost: so it was on CI; here a sleeper that ignores it), by killing its worker,
    so that its CPU is free again well before its minute is up; and the same cluster then
    runs the next map, in order. CI's driver once died (exit status 1, a failed Ray check) in
    the first Ray test after a map whose item had failed."""
    def sleeper(seconds: float) -> None:
        # Short sleeps in a Python loop (defined here: Ray pickles it by value): a gentle
        # cancel interrupts a task between two bytecodes, as it does a calibration, not
        # inside one long C call such as a single time.sleep
        end = time.monotonic() + float(seconds)
        while time.monotonic() < end:
            try:
                time.sleep(0.05)
            except KeyboardInterrupt:
                if not ignores_interrupts:
                    raise

    start = time.monotonic()
    with pytest.raises(ValueError):
        Executor(ExecutorKind.RAY).map(sleeper, ["not a number", 60.0])
    assert time.monotonic() - start < 30.0
    while ray_cluster.available_resources().get("CPU", 0.0) < 2.0:  # the sleeper's CPU
        assert time.monotonic() - start < 30.0, "the sleeping item was not cancelled"
        time.sleep(0.2)
    items = [1.0, 0.5, math.inf, 32.0]
    assert Executor(ExecutorKind.RAY).map(qps_label, items) == ["1", "0.5", "inf", "32"]


def test_sim_validation_on_ray_gives_the_same_table_as_locally(ray_cluster) -> None:
    """A small subset: the CPU runs of data/raw/cpu-tiny at three rates (three folds)."""
    from hgresearch.data.ingest import read_runs
    from hgresearch.sim.validation import simulated_leave_one_qps_out, simulated_validation_table

    runs = read_runs([REPO_ROOT / "data/raw/cpu-tiny"], relative_to=REPO_ROOT)
    runs = runs[runs.request_rate_qps.isin(sorted(set(runs.request_rate_qps))[:3])]
    local = simulated_leave_one_qps_out(runs)
    on_ray = simulated_leave_one_qps_out(runs, executor=Executor(ExecutorKind.RAY))
    assert len(local) == 3 * 6  # three held-out rates x six metrics
    pd.testing.assert_frame_equal(local, on_ray, check_exact=True)
    pd.testing.assert_frame_equal(simulated_validation_table(local), simulated_validation_table(on_ray),
                                  check_exact=True)


def test_plan_capacity_searches_on_ray_give_the_same_table(ray_cluster) -> None:
    from hgresearch.plan import (
        Candidate,
        Demand,
        LengthClass,
        PlanProblem,
        SimulatedReplicaRates,
        SLOClass,
        replica_rate_table,
    )

    problem = PlanProblem("DeepSeek-R1-Distill-Qwen-14B", Demand.steady(10.0),
                          (LengthClass("short", 256, 64),), (SLOClass("chat", 1.0, ttft_ms=300),),
                          (Candidate("H100-PCIe", 1), Candidate("RTX-4090", 2)))
    from hgresearch.sim.steady_state import SteadyStateSettings

    provider = SimulatedReplicaRates(steady=SteadyStateSettings(
        warmup_requests=20, window_requests=40, seeds=(0,), rate_tolerance=0.2))
    local = replica_rate_table(problem, provider)
    on_ray = replica_rate_table(problem, provider, executor=Executor(ExecutorKind.RAY))
    assert len(local) == 2
    pd.testing.assert_frame_equal(local, on_ray, check_exact=True)
