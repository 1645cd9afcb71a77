"""A plan as a fleet file (hgresearch.plan.fleetfile): it round-trips into the simulator and
the live bench."""

from __future__ import annotations

import pytest

from hgresearch.errors import InputError
from hgresearch.plan import (
    solve,
    write_fleet_file,
)


def test_fleet_file_round_trips_into_simulator_and_bench(small_plan, tmp_path) -> None:
    from hgresearch.bench.config import BenchConfig
    from hgresearch.bench.options import validate_config
    from hgresearch.sim.fleet import sim_replicas
    from hgresearch.sim.fleet_spec import bench_endpoints, load_fleet

    problem, caps, _ = small_plan
    plan = solve(problem, caps)
    path = write_fleet_file(plan, tmp_path / "fleet.yaml")
    fleet = load_fleet(path)
    replicas = sim_replicas(fleet, fits={})
    expected = [(c.gpu_name, c.num_gpus) for j, c in enumerate(problem.candidates)
                for _ in range(plan.replicas[j, 0])]
    assert [(r.gpu_name, r.num_gpus) for r in replicas] == expected
    prices = {r.gpu_name: r.price_usd_per_gpu_h for r in replicas}
    assert prices.get("H100-PCIe", 2.0) == 2.0
    urls = {row.config: [f"http://h{i}-{k}:8000" for k in range(row.replicas)]
            for i, row in enumerate(plan.fleet().itertuples())}
    live = write_fleet_file(plan, tmp_path / "live.yaml", base_urls=urls)
    endpoints = bench_endpoints(load_fleet(live), "my-model")
    assert len(endpoints) == len(replicas)
    validate_config(BenchConfig(base_url=endpoints[0]["base_url"], fleet=endpoints))
    with pytest.raises(InputError, match="base URL"):
        write_fleet_file(plan, tmp_path / "bad.yaml", base_urls={})
