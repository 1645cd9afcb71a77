"""``hgresearch energy``: energy per token of result files or run folders."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hgresearch.accounting.energy import TdpAssumption
from hgresearch.cli.options import Seed, SkipBadLines, output_option


def energy(
    paths: Annotated[list[Path], typer.Argument(
        help="hgresearch run folders (or folders of them) and/or vLLM result files.")],
    tdp: Annotated[TdpAssumption, typer.Option(help="TDP assumption: paper (H100 PCIe 700 W) "
                                                    "or datasheet (350 W).")]
    = TdpAssumption.PAPER,
    grid_g_per_kwh: Annotated[float, typer.Option(help="Grid intensity, g CO2 per kWh.")]
    = 242.0,
    seed: Seed = 0,
    output: Annotated[Path | None, output_option(
        "Also write the full table (.csv or .parquet).")] = None,
    skip_bad_lines: SkipBadLines = False,
) -> None:
    """Energy per token of each run: TDP model, power-model bracket, measured (NVML) value.

    Run folders with telemetry get the measured value with its 95% interval; missing stays
    empty.
    """
    from hgresearch.accounting.energy import energy_per_run, run_summaries
    from hgresearch.data.ingest import read_runs
    from hgresearch.report.writers import write_frame

    files = [p for p in paths if p.is_file()]
    folders = [p for p in paths if not p.is_file()]
    runs = read_runs(files + run_summaries(folders),
                     on_error="skip" if skip_bad_lines else "raise")
    table = energy_per_run(runs, tdp=tdp.value, grid_g_per_kwh=grid_g_per_kwh, seed=seed)
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
