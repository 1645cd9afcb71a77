"""What identifies a run: the configuration and operating-point keys, and their labels.

Ingest, the energy and cost tables, the models and the sweep all group runs or name
configurations with these (one definition each).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hgresearch.units import Number

if TYPE_CHECKING:
    import pandas as pd

#: Columns that identify a *configuration* (a serving setup whose runs differ only in load).
CONFIG_KEYS = ["model", "dataset", "gpu_name", "gpu_count", "replicas"]
#: Columns that describe the load offered to a configuration.
LOAD_KEYS = ["num_prompts", "request_rate_qps", "burstiness", "max_concurrency"]
#: Identity of an operating point (configuration, parallelism and load); runs sharing it are
#: repeats.
POINT_KEYS = [*CONFIG_KEYS, "tensor_parallel_size", *LOAD_KEYS]


def total_gpus(gpu_count: Number, replicas: Number | int = 1) -> Number:
    """GPUs of a configuration: ``gpu_count`` per replica, every replica (what is billed, powered
    and manufactured)."""
    return gpu_count * replicas


def replicated_label(hardware: str, replicas: int = 1) -> str:
    """Label of ``replicas`` copies of the hardware labelled ``hardware``: ``4 x (2x RTX-4090)``
    (the label itself for one replica)."""
    return hardware if replicas == 1 else f"{replicas} x ({hardware})"


def hardware_label(gpu_name: str, gpu_count: int, replicas: int = 1) -> str:
    """Human label of a configuration's hardware: ``1x H100-PCIe``, ``4 x (2x RTX-4090)``."""
    return replicated_label(f"{int(gpu_count)}x {gpu_name}", int(replicas))


def config_label(row: pd.Series | Mapping[str, Any]) -> str:
    """Short human label of a configuration: ``DeepSeek-R1-Distill-Qwen-7B on 2x RTX-4090``.

    ``row`` holds the :data:`CONFIG_KEYS` (a runs-table row or a config dict; ``replicas`` may
    be missing or empty: one replica)."""
    replicas = int(row.get("replicas", 1) or 1)
    return f"{row['model']} on {hardware_label(row['gpu_name'], row['gpu_count'], replicas)}"


#: ``MODEL on Nx GPU``: the label :func:`config_label` gives one replica.
CONFIG_LABEL = re.compile(r"^(?P<model>\S.*?) on (?P<num_gpus>\d+)x (?P<gpu>\S+)$")


def parse_config_label(label: str) -> tuple[str, str, int] | None:
    """``(model, gpu_name, gpu_count)`` of a label ``MODEL on Nx GPU`` (the inverse of
    :func:`config_label` for one replica; names as written, not looked up in the catalogs);
    ``None`` for anything else (a replicated label, ``N`` < 1, no ``on``)."""
    match = CONFIG_LABEL.match(label.strip())
    if match is None or int(match["num_gpus"]) < 1:
        return None
    return match["model"], match["gpu"], int(match["num_gpus"])
