"""``hgresearch sim``: the serving simulator (docs/simulator.md).

``sim fleet`` simulates a fleet file's replicas behind a routing policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hgresearch.cli import app
from hgresearch.cli.errors import command
from hgresearch.cli.options import Seed
from hgresearch.routing import Policy

sim_app = typer.Typer(help="Simulate vLLM replicas and fleets (docs/simulator.md).",
                      no_args_is_help=True)
app.add_typer(sim_app, name="sim")


@command(sim_app, "fleet")
def fleet(
    fleet_file: Annotated[Path, typer.Argument(help="Fleet file (YAML; docs/simulator.md).")],
    policy: Annotated[Policy, typer.Option(help="Routing policy.")] = Policy.JSQ,
    qps: Annotated[float, typer.Option(help="Request rate (req/s) of the Poisson arrivals.")]
    = 20.0,
    num_prompts: Annotated[int, typer.Option(help="Requests.")] = 200,
    workload: Annotated[str, typer.Option(help="Length mix, as hgresearch bench --workload "
                                          "(token counts only are used).")]
    = "random:input_len=1024,output_len=128",
    seed: Seed = 0,
    threshold_tokens: Annotated[int, typer.Option(help="length-aware: prompts of at least this "
                                                  "many tokens go to the fastest replica.")]
    = 1024,
    max_outstanding: Annotated[int, typer.Option(help="cost-spillover: SLO-safe outstanding "
                                                 "requests per replica (unless the fleet file "
                                                 "gives one).")] = 16,
) -> None:
    """Simulate a fleet at one request rate; print per-replica and overall summaries.

    Arrivals and lengths are those the live ``hgresearch bench`` would send with the same
    --qps, --num-prompts, --workload and --seed.
    """
    from hgresearch.arrivals import arrival_offsets_ns
    from hgresearch.bench.options import parse_workload_option
    from hgresearch.bench.workloads import build_requests
    from hgresearch.errors import InputError
    from hgresearch.routing import make_policy
    from hgresearch.sim.fleet import fleet_summary, load_fleet, sim_replicas, simulate_fleet

    if num_prompts < 1:
        raise InputError(f"--num-prompts: expected an integer >= 1, got {num_prompts}")
    if not qps > 0:
        raise InputError(f"--qps: expected a rate > 0, got {qps}")
    replicas = sim_replicas(load_fleet(fleet_file))
    specs = build_requests(parse_workload_option(workload), num_prompts, seed=seed)
    arrivals_s = arrival_offsets_ns(num_prompts, qps, seed=seed) / 1e9
    router_policy = make_policy(policy, seed=seed, threshold_tokens=threshold_tokens,
                                max_outstanding=max_outstanding)
    frame = simulate_fleet(replicas, router_policy, arrivals_s,
                           [s.prompt_len for s in specs], [s.output_len for s in specs])
    table = fleet_summary(frame, replicas)
    for replica in replicas:
        if replica.step_time_source == "roofline floor only":
            typer.echo(f"note: {replica.name}: no step-time coefficients, the roofline floor "
                       "alone (a lower bound: latencies are optimistic)", err=True)
    typer.echo(f"fleet {fleet_file}, policy {policy.value}, {qps:g} req/s, "
               f"{num_prompts} requests, seed {seed}")
    typer.echo(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
