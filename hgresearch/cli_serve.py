"""CLI commands for serving: ``hgresearch serve``, ``hgresearch model synth|list``,
``hgresearch sweep`` (registered in :mod:`hgresearch.cli`)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

model_app = typer.Typer(help="Benchmark models built offline from the architecture catalog.",
                        no_args_is_help=True)


@model_app.command("list")
def model_list() -> None:
    """List the catalog's models (data/model_architectures.csv) that `model synth` can build."""
    from hgresearch.catalogs import model_catalog

    table = model_catalog()
    for row in table.itertuples():
        typer.echo(f"{row.model:48s} {row.architecture:18s} layers={int(row.num_layers):3d} "
                   f"hidden={int(row.hidden_size):5d} heads={int(row.num_attention_heads)}/"
                   f"{int(row.num_kv_heads)} vocab={int(row.vocab_size)}")


@model_app.command("synth")
def model_synth(
    name: Annotated[str, typer.Argument(help="Catalog model (see `hgresearch model list`).")],
    out: Annotated[Path | None, typer.Option(
        "-o", "--out", help="Model folder to write (default build/models/NAME).")] = None,
    max_model_len: Annotated[int | None, typer.Option(
        help="Override max_position_embeddings.")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing folder.")] = False,
) -> None:
    """Write a weightless model folder (config + locally trained tokenizer); serve it with
    --load-format dummy (random weights: same speed as the real model)."""
    from hgresearch.errors import InputError
    from hgresearch.modelsynth import synth_model

    target = out or Path("build/models") / name
    try:
        path = synth_model(name, target, max_position_embeddings=max_model_len,
                           overwrite=overwrite)
    except (InputError, FileExistsError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{name} -> {path} (serve with --load-format dummy)")


def serve(
    model: Annotated[str, typer.Argument(
        help="Model folder, Hugging Face name, or a catalog name with --synth.")],
    synth: Annotated[bool, typer.Option(
        help="MODEL is a catalog name: build it offline first and serve dummy weights.")]
    = False,
    port: Annotated[int, typer.Option(help="Port to listen on (must be free).")] = 8000,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    served_model_name: Annotated[str | None, typer.Option(help="Name clients use.")] = None,
    tensor_parallel_size: Annotated[int, typer.Option("--tp", help="GPUs per replica.")] = 1,
    dtype: Annotated[str | None, typer.Option(help="auto/float16/bfloat16/float32.")] = None,
    max_model_len: Annotated[int | None, typer.Option(help="Context length.")] = None,
    gpu_memory_utilization: Annotated[float | None, typer.Option()] = None,
    load_format: Annotated[str | None, typer.Option(help="e.g. dummy.")] = None,
    gpus: Annotated[str | None, typer.Option(help="CUDA_VISIBLE_DEVICES, e.g. 0,1.")] = None,
    log_dir: Annotated[Path, typer.Option(help="Server log and caches.")] = Path("build/serve"),
    extra: Annotated[list[str] | None, typer.Option(
        help="Extra vLLM argument (repeatable), e.g. --extra=--enforce-eager.")] = None,
) -> None:
    """Start a vLLM server, wait until healthy, keep it up until Ctrl-C, then stop it."""
    from hgresearch.bench.server import ServerConfig, ServerError, VLLMServer, sigterm_as_exit
    from hgresearch.errors import InputError

    model_path = model
    if synth:
        from hgresearch.modelsynth import synth_model

        try:
            model_path = str(synth_model(model, Path("build/models") / model))
        except (InputError, FileExistsError) as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(2) from None
        served_model_name = served_model_name or model
        load_format = load_format or "dummy"
    config = ServerConfig(model=model_path, served_model_name=served_model_name, host=host,
                          port=port, tensor_parallel_size=tensor_parallel_size, dtype=dtype,
                          max_model_len=max_model_len,
                          gpu_memory_utilization=gpu_memory_utilization,
                          load_format=load_format, cuda_visible_devices=gpus,
                          extra_args=list(extra or []))
    server = VLLMServer(config, log_dir)
    typer.echo(f"starting vLLM ({server.python}); log: {server.log_path}")
    try:
        with sigterm_as_exit(), server:
            info = server.info()
            (Path(log_dir) / "server.json").write_text(json.dumps(info, indent=1) + "\n")
            typer.echo(f"healthy after {server.ready_after_s:.1f} s: {server.base_url} "
                       f"(model {config.name}, {info['vllm_distribution']} "
                       f"{info['vllm_version']}); Ctrl-C stops it")
            while server.alive():
                time.sleep(1.0)
            typer.echo(f"error: server exited; see {server.log_path}", err=True)
            raise typer.Exit(1)
    except ServerError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        typer.echo("stopped")


def sweep(
    sweep_file: Annotated[Path, typer.Argument(help="Sweep file (YAML), e.g. sweeps/cpu.yaml.")],
    resume: Annotated[bool, typer.Option(help="Skip finished runs; continue the others.")]
    = False,
    out_dir: Annotated[Path | None, typer.Option(help="Override the file's out_dir.")] = None,
    dry_run: Annotated[bool, typer.Option(help="List the runs and exit.")] = False,
    dummy_weights: Annotated[bool, typer.Option(
        help="Serve each model as its catalog architecture with random weights (no "
             "download; same speed; outputs are fixed-length anyway).")] = False,
) -> None:
    """Run a sweep: server configurations x QPS values x repeats (see docs/serving.md)."""
    from hgresearch.errors import InputError
    from hgresearch.sweep import (
        apply_dummy_weights,
        is_finished,
        load_sweep,
        qps_label,
        run_points,
        run_sweep,
    )

    try:
        plan = load_sweep(sweep_file)
        if dummy_weights:
            apply_dummy_weights(plan)
    except InputError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    if out_dir is not None:
        plan.out_dir = out_dir
    if dry_run:
        for point in run_points(plan):
            state = "done" if is_finished(point.run_dir) else "todo"
            typer.echo(f"{state} qps={qps_label(point.qps)} rep={point.repeat} {point.run_dir}")
        return
    try:
        statuses = run_sweep(plan, resume=resume, echo=typer.echo)
    except (InputError, FileExistsError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        typer.echo("interrupted; server stopped. Continue with --resume.", err=True)
        raise typer.Exit(130) from None
    if any(s["status"] == "failed" for s in statuses):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the main CLI."""
    app.add_typer(model_app, name="model")
    app.command("serve")(serve)
    app.command("sweep")(sweep)
