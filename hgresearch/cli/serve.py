"""``hgresearch serve``, ``hgresearch sweep`` and ``hgresearch model list|synth`` (real vLLM
servers and the benchmark models they serve)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from hgresearch.cli.errors import INTERRUPTED_EXIT_CODE, fail
from hgresearch.cli.options import (
    Address,
    AllowLarge,
    ExecutorOption,
    Resume,
    executor_of,
    output_option,
)
from hgresearch.executors import DEFAULT_RETRIES, ExecutorKind
from hgresearch.units import SECONDS_PER_HOUR


def model_list() -> None:
    """List the architecture catalog's models that `model synth` can build."""
    from hgresearch.data.catalogs import model_catalog

    table = model_catalog()
    for row in table.itertuples():
        typer.echo(f"{row.model:48s} {row.architecture:18s} layers={int(row.num_layers):3d} "
                   f"hidden={int(row.hidden_size):5d} heads={int(row.num_attention_heads)}/"
                   f"{int(row.num_kv_heads)} vocab={int(row.vocab_size)}")


def model_synth(
    name: Annotated[str, typer.Argument(help="Catalog model (see `hgresearch model list`).")],
    output: Annotated[Path | None, output_option(
        "Model folder to write (default build/models/NAME).")] = None,
    max_model_len: Annotated[int | None, typer.Option(
        help="Override max_position_embeddings.")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing folder.")] = False,
) -> None:
    """Write a weightless model folder (config + locally trained tokenizer).

    Serve it with --load-format dummy: random weights run at the real model's speed.
    """
    from hgresearch.bench.dummy_model import synth_model

    target = output or Path("build/models") / name
    path = synth_model(name, target, max_position_embeddings=max_model_len, overwrite=overwrite)
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
    cpu_affinity: Annotated[str | None, typer.Option(
        help="Cores the server may use, e.g. 0 or 0-1 (keeps a CPU server off the client's "
             "core).")] = None,
    nice: Annotated[int | None, typer.Option(help="Lower the server's priority (0..19).")]
    = None,
) -> None:
    """Start a vLLM server, wait until healthy, keep it up until Ctrl-C, then stop it."""
    from hgresearch.bench.server.process import sigterm_as_exit
    from hgresearch.bench.server.vllm import VLLMServer, VLLMServerConfig

    model_path = model
    if synth:
        from hgresearch.bench.dummy_model import synth_model

        model_path = str(synth_model(model, Path("build/models") / model))
        served_model_name = served_model_name or model
        load_format = load_format or "dummy"
    config = VLLMServerConfig(model=model_path, served_model_name=served_model_name, host=host,
                              port=port, tensor_parallel_size=tensor_parallel_size, dtype=dtype,
                              max_model_len=max_model_len,
                              gpu_memory_utilization=gpu_memory_utilization,
                              load_format=load_format, cuda_visible_devices=gpus,
                              extra_args=list(extra or []), cpu_affinity=cpu_affinity, nice=nice)
    config.check_process_options()
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
            raise fail(f"server exited; see {server.log_path}", exit_code=1)
    except KeyboardInterrupt:
        typer.echo("stopped")


def sweep(
    sweep_file: Annotated[Path, typer.Argument(help="Sweep file (YAML), e.g. sweeps/cpu.yaml.")],
    resume: Resume = False,
    output: Annotated[Path | None, output_option(
        "Folder of the run folders (default: the sweep file's out_dir).")] = None,
    dry_run: Annotated[bool, typer.Option(help="List the runs and exit.")] = False,
    dummy_weights: Annotated[bool, typer.Option(
        help="Serve each model as its catalog architecture with random weights (no "
             "download; same speed; outputs are fixed-length anyway).")] = False,
    executor: ExecutorOption = ExecutorKind.LOCAL,
    address: Address = None,
    retries: Annotated[int, typer.Option(
        help="--executor ray: tries again a configuration whose task failed (raised, node "
             "died, server failed) this many times before reporting its runs failed.")]
    = DEFAULT_RETRIES,
    nodes: Annotated[int, typer.Option(
        help="--dry-run: also estimate the wall time on this many nodes (docs/cluster.md).")]
    = 1,
    allow_large: AllowLarge = False,
) -> None:
    """Run a sweep: server configurations x QPS values x repeats (see docs/serving.md;
    on a Ray cluster with --executor ray: docs/cluster.md). Here (--executor local) a sweep
    whose dry-run estimate is over 1 hour is refused before any server starts, without
    --allow-large; on Ray the time depends on the cluster's nodes."""
    from hgresearch.bench.sweep import (
        apply_dummy_weights,
        configuration_durations_s,
        load_sweep,
        makespan_s,
        qps_label,
        run_points,
        run_sweep,
        sweep_estimate,
    )
    from hgresearch.bench.sweep.run import SweepInterrupted
    from hgresearch.bounds import check_work
    from hgresearch.data.runfolder import is_finished

    plan = load_sweep(sweep_file)
    if dummy_weights:
        apply_dummy_weights(plan)
    if output is not None:
        plan.out_dir = output
    if dry_run:
        for point in run_points(plan):
            state = "done" if is_finished(point.run_dir) else "todo"
            typer.echo(f"{state} qps={qps_label(point.qps)} rep={point.repeat} {point.run_dir}")
        durations = configuration_durations_s(plan)
        one_node_h = makespan_s(durations, 1) / SECONDS_PER_HOUR
        k_nodes_h = makespan_s(durations, nodes) / SECONDS_PER_HOUR
        typer.echo(f"estimated wall time: {one_node_h:.1f} h on 1 node, "
                   f"{k_nodes_h:.1f} h on {nodes} node(s) "
                   f"({len(durations)} server configurations; see docs/cluster.md)")
        return
    if executor == ExecutorKind.LOCAL:
        check_work(sweep_estimate(plan), allow_large=allow_large)
    try:
        statuses = run_sweep(plan, resume=resume, echo=typer.echo,
                             executor=executor_of(executor, address), retries=retries)
    except SweepInterrupted as interrupted:
        raise fail(interrupted.message(), INTERRUPTED_EXIT_CODE) from None
    if any(s["status"] == "failed" for s in statuses):
        raise typer.Exit(1)
