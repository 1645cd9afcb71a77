"""What one benchmark point is: :class:`BenchConfig` (saved in ``config.json``, without
secrets), the endpoints of a multi-endpoint run, the headers of every request (the API key is
read from the environment, never saved), and the resume rule: a run folder continues only with
the parameters it was started with.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hgresearch.bench.schedule import DEFAULT_SPIN_NS
from hgresearch.data.runfolder import CONFIG_FILE, read_config
from hgresearch.errors import InputError

#: Config fields a resumed run may change (where the API key is read from); any other change
#: would mix two measurements in one run folder, so a resume refuses it.
RESUME_MAY_DIFFER = ("api_key_env",)


@dataclass
class BenchConfig:
    """Parameters of one benchmark point (everything but secrets; saved in config.json)."""

    base_url: str = "http://127.0.0.1:8000"
    model: str = "model"                  # served model name sent in each request
    endpoint: str = "completions"         # "completions" or "chat"
    request_rate_qps: float = math.inf    # mean arrival rate; inf sends all at once
    num_prompts: int = 100                # measured requests (warm-up not counted)
    burstiness: float = 1.0               # gamma shape; 1 = Poisson
    arrival: str = "gamma"                # "gamma" (Poisson at burstiness 1) or "constant"
    max_concurrency: int | None = None    # cap on requests in flight (None: no cap)
    warmup_requests: int = 1              # sent before the run, excluded from metrics
    workload: dict[str, Any] = field(default_factory=lambda: {
        "kind": "random", "input_len": 1024, "output_len": 128, "range_ratio": 1.0})
    dataset: str | None = None            # label in the summary (default: workload kind)
    seed: int = 0                         # workload and schedule seed
    tokenizer: str | None = None          # local tokenizer path (None: word approximation)
    timeout_s: float = 600.0              # per-request timeout
    api_key_env: str | None = "OPENAI_API_KEY"  # env var holding the API key (never saved)
    ignore_eos: bool = True               # fixed output lengths (vLLM's ignore_eos)
    continuous_usage: bool = True         # ask vLLM for usage on every streamed event
    extra_body: dict[str, Any] = field(default_factory=dict)  # more request fields
    gpu_name: str | None = None           # hardware label override (else NVML, else CPU)
    gpu_count: int | None = None          # GPU count override (else NVML count, else 1)
    tensor_parallel_size: int | None = None
    replicas: int = 1
    price_usd_per_gpu_h: float | None = None
    telemetry: bool = True                # sample NVML while running (if available)
    telemetry_hz: float = 10.0
    idle_baseline_s: float = 5.0          # idle power measured this long before the run
    goodput_slo_ms: dict[str, float] | None = None  # e.g. {"ttft": 500, "tpot": 50}
    steady_fraction: float = 0.1          # ramp-up share left out of the steady window
    bootstrap_reps: int = 1000
    spin_ns: int = DEFAULT_SPIN_NS        # see schedule.sleep_until_ns
    http_client: str = "fast"             # "fast" (hgresearch.bench.fasthttp) or "aiohttp"
    backend: str | None = None            # label; default "vllm" / "openai-chat"
    # Several endpoints behind a router (None: the one server at base_url). Each endpoint:
    # {"base_url", "model" (served name), "name", "capacity_weight", "price_usd_per_h",
    # "max_outstanding"}; see fleet_endpoints(). base_url is then the first endpoint's.
    fleet: list[dict[str, Any]] | None = None
    policy: str = "jsq"                   # routing policy (hgresearch.traffic.routing.Policy)
    policy_threshold_tokens: int = 1024   # length-aware: long prompts to the fastest
    policy_max_outstanding: int = 16      # cost-spillover: default SLO-safe limit

    def to_json(self) -> dict[str, Any]:
        """JSON-safe dict (``inf`` as the string "inf")."""
        out = dataclasses.asdict(self)
        out["request_rate_qps"] = rate_json(self.request_rate_qps)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchConfig:
        """Inverse of :meth:`to_json` (unknown keys are ignored)."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if "request_rate_qps" in values:
            values["request_rate_qps"] = float(values["request_rate_qps"])
        return cls(**values)

    def for_endpoint(self, endpoint: dict[str, Any]) -> BenchConfig:
        """This config aimed at one endpoint of a multi-endpoint run, as if it were the only
        server (its base URL and served model; no fleet)."""
        return dataclasses.replace(self, base_url=endpoint["base_url"],
                                   model=endpoint["model"], fleet=None)


def rate_json(rate: float) -> float | str:
    """A request rate as JSON holds it: a number, or the string ``"inf"``."""
    return "inf" if math.isinf(rate) else float(rate)


def fleet_endpoints(config: BenchConfig) -> list[dict[str, Any]]:
    """The endpoints of a multi-endpoint run, defaults filled in (``model``: the config's,
    ``name``: the base URL, ``capacity_weight`` 1, ``price_usd_per_h`` 0); empty for a
    single-endpoint run."""
    return [{"model": config.model, "name": e["base_url"], "capacity_weight": 1.0,
             "price_usd_per_h": 0.0, "max_outstanding": None, **e}
            for e in (config.fleet or [])]


def api_key(config: BenchConfig) -> str:
    """The API key from the environment variable the config names ("" when none)."""
    return os.environ.get(config.api_key_env, "") if config.api_key_env else ""


def request_headers(config: BenchConfig) -> tuple[dict[str, str], tuple[str, ...]]:
    """Headers of every request, and the secrets to scrub from anything written."""
    key = api_key(config)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers, ((key,) if key else ())


def config_differences(stored: dict[str, Any], config: BenchConfig) -> list[str]:
    """Fields of ``config`` that differ from a saved run's config (``config.json``'s
    ``config``), as ``"seed (run has 0, asked 9)"``; :data:`RESUME_MAY_DIFFER` is ignored."""
    saved = BenchConfig.from_json(stored).to_json()
    new = config.to_json()
    return [f"{name} (run has {saved.get(name)!r}, asked {new.get(name)!r})"
            for name in new if name not in RESUME_MAY_DIFFER and saved.get(name) != new.get(name)]


def check_resume(config: BenchConfig, run_dir: Path) -> None:
    """Refuse to resume (or to skip as finished) a run folder saved with another config,
    listing every differing field."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        return
    stored = read_config(run_dir)
    differences = config_differences(stored["config"], config)
    if differences:
        raise InputError("cannot resume a run with different parameters: "
                         + "; ".join(differences)
                         + "; pass the saved values or choose a new folder", file=str(path))
