"""``hgresearch energy``: energy per token of result files or run folders (thin CLI wrapper)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def energy_command(
    paths: Annotated[list[Path], typer.Argument(
        help="hgresearch run folders (or folders of them) and/or vLLM result files.")],
    tdp: Annotated[str, typer.Option(help="TDP assumption: 'paper' (H100 PCIe 700 W) or "
                                          "'datasheet' (350 W).")] = "paper",
    grid_g_per_kwh: Annotated[float, typer.Option(help="Grid intensity, g CO2 per kWh.")]
    = 242.0,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap interval.")] = 0,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Also write the full table (.csv or .parquet).")] = None,
) -> None:
    """Energy per token of each run: TDP model, power-model bracket and, for run folders with
    telemetry, the measured value with its 95% interval (missing stays empty)."""
    from hgresearch.energy import energy_per_run, run_summaries
    from hgresearch.errors import InputError
    from hgresearch.ingest import read_runs
    from hgresearch.tables import write_frame

    try:
        files = [p for p in paths if p.is_file()]
        folders = [p for p in paths if not p.is_file()]
        runs = read_runs(files + run_summaries(folders))
        table = energy_per_run(runs, tdp=tdp, grid_g_per_kwh=grid_g_per_kwh, seed=seed)
    except InputError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    for row in table.itertuples():
        name = Path(row.run_dir).name if isinstance(row.run_dir, str) else row.run_id
        line = (f"{name}  {row.hardware} @ {row.request_rate_qps:g} QPS: "
                f"TDP {row.tdp_energy_per_tok_j:.4f} J/tok; model "
                f"[{row.model_energy_per_tok_low_j:.4f}, {row.model_energy_per_tok_high_j:.4f}]"
                f" J/tok")
        if row.measured_energy_per_tok_j == row.measured_energy_per_tok_j:  # not NaN
            line += (f"; measured {row.measured_energy_per_tok_j:.4f} J/tok "
                     f"[{row.measured_energy_per_tok_ci_low_j:.4f}, "
                     f"{row.measured_energy_per_tok_ci_high_j:.4f}] "
                     f"({row.measured_energy_source}, idle {row.measured_idle_power_w:.0f} W, "
                     f"measured/TDP {row.measured_to_tdp_ratio:.2f})")
        else:
            line += "; measured: none (no telemetry)"
        typer.echo(line)
    if output is not None:
        write_frame(table, output)
        typer.echo(f"{len(table)} runs -> {output}")
