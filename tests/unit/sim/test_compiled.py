"""The mypyc-compiled simulator (:mod:`hgresearch.sim.compiled`, built by ``setup.py``) against
its sources: the same simulated times bit for bit, pickles that either side reads, and compiled
copies that no longer match their sources never run.

The comparisons run the simulator in two subprocesses, one with ``HGRESEARCH_PURE_PYTHON=1``
(the sources). Where the compiled copies were not built they skip — except in CI, which builds
them (``make install``) and must run them."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import textwrap
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

from hgresearch.sim import compiled

#: Simulates a workload that exercises every path of the scheduler: chunked prefills (a small
#: token budget), preemptions (a small KV cache), one-token outputs, simultaneous arrivals,
#: the roofline floor, the quiet-step loop and the fleet loop with a router. Prints a pickle
#: of every time, counter and a few pickled entities.
SIMULATE = textwrap.dedent("""
    import pickle, sys
    import numpy as np
    import hgresearch.sim as sim
    from hgresearch.sim import (LinearStepTimeModel, ReplicaConfig, RooflineFloor,
                                make_requests, run_replica, run_replicas)
    from hgresearch.traffic.routing import ReplicaState, Router, make_policy

    rng = np.random.default_rng(7)
    n = 2500
    arrivals = np.round(np.cumsum(rng.exponential(1 / 30, n)), 3)  # rounded: some coincide
    prompts = rng.integers(1, 1200, n)
    outputs = rng.integers(1, 400, n)
    config = ReplicaConfig(num_kv_blocks=700, block_size=16, max_num_seqs=48,
                           max_num_batched_tokens=256)
    floor = RooflineFloor(weights_bytes=14e9, kv_bytes_per_token=131072.0,
                          bandwidth_bytes_per_s=2.0e12, flops_per_token=14e9,
                          peak_flops_per_s=7.5e14)
    model = LinearStepTimeModel(0.003, 3.1e-5, 1.7e-4, 3.3e-8, floor=floor)
    requests = make_requests(config, arrivals, prompts, outputs)
    one = run_replica(config, model, requests)
    fleet_requests = make_requests(config, arrivals, prompts, outputs)
    router = Router(make_policy("least-tokens"), [ReplicaState(), ReplicaState()])
    runs, replica_of = run_replicas([config, config], [model, model], fleet_requests, router)
    print(pickle.dumps({
        "compiled": sim.COMPILED,
        "module": sim.scheduler.__file__,
        "first_token_s": [r.first_token_s for r in requests],
        "done_s": [r.done_s for r in requests],
        "counts": (one.num_steps, one.num_completions, one.num_preemptions, one.end_s),
        "fleet_done_s": [r.done_s for r in fleet_requests],
        "fleet": [(r.num_steps, r.num_preemptions, r.end_s) for r in runs] + [replica_of],
        "pickled": pickle.dumps((config, requests[:3], one)),
    }).hex())
""")

#: Unpickles what the other side pickled and prints what it got.
UNPICKLE = textwrap.dedent("""
    import pickle, sys
    config, requests, run = pickle.loads(bytes.fromhex(sys.stdin.read()))
    print(pickle.dumps((repr(config), hash(config), [repr(r) for r in requests],
                        [r.done_s for r in run.requests], run.num_events)).hex())
""")


def _run(script: str, *, pure: bool, stdin: str = "") -> object:
    env = {k: v for k, v in os.environ.items() if k != compiled.PURE_PYTHON_ENV}
    if pure:
        env[compiled.PURE_PYTHON_ENV] = "1"
    done = subprocess.run([sys.executable, "-c", script], input=stdin, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return pickle.loads(bytes.fromhex(done.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def both() -> tuple[dict[str, object], dict[str, object]]:
    compiled_run = _run(SIMULATE, pure=False)
    source_run = _run(SIMULATE, pure=True)
    assert isinstance(compiled_run, dict) and isinstance(source_run, dict)
    assert not source_run["compiled"], source_run["module"]
    if not compiled_run["compiled"]:
        if os.environ.get("CI"):
            pytest.fail("CI builds the compiled simulator (make install); it did not run: "
                        f"{compiled_run['module']}")
        pytest.skip("the compiled simulator is not built here (make install builds it)")
    return compiled_run, source_run


def test_compiled_and_source_simulators_agree_bit_for_bit(both):
    compiled_run, source_run = both
    assert str(compiled_run["module"]).endswith(tuple(EXTENSION_SUFFIXES))
    assert str(source_run["module"]).endswith("scheduler.py")
    for key in ("first_token_s", "done_s", "counts", "fleet_done_s", "fleet"):
        assert compiled_run[key] == source_run[key], key
    num_preemptions = compiled_run["counts"][2]
    assert num_preemptions > 0  # the workload reaches the preemption path


def test_each_side_reads_the_others_pickles(both):
    compiled_run, source_run = both
    from_compiled = _run(UNPICKLE, pure=True, stdin=compiled_run["pickled"].hex())
    from_source = _run(UNPICKLE, pure=False, stdin=source_run["pickled"].hex())
    assert from_compiled == from_source


def _package_copy(tmp_path: Path) -> Path:
    """The compiled modules' sources in a folder of their own, with stand-in compiled copies."""
    package = tmp_path / "sim"
    package.mkdir()
    suffix = EXTENSION_SUFFIXES[0]
    for name in compiled.COMPILED_MODULES:
        shutil.copy(compiled.PACKAGE_DIR / f"{name}.py", package / f"{name}.py")
        (package / f"{name}{suffix}").write_bytes(b"")
    return package


def test_compiled_copies_count_only_while_their_sources_are_unchanged(tmp_path):
    package = _package_copy(tmp_path)
    assert compiled.stale_modules(package) == list(compiled.COMPILED_MODULES)  # no manifest
    compiled.write_manifest(package)
    assert compiled.stale_modules(package) == []
    with (package / "scheduler.py").open("a") as source:
        source.write("# edited after the build\n")
    assert compiled.stale_modules(package) == ["scheduler"]
    compiled.write_manifest(package)
    for path in package.glob("simulator.*"):
        if path.suffix != ".py":
            path.unlink()
    assert compiled.stale_modules(package) == ["simulator"]  # its compiled copy is gone
    (package / compiled.MANIFEST).write_text("not json")
    assert compiled.stale_modules(package) == list(compiled.COMPILED_MODULES)


def test_a_stale_compiled_copy_is_not_imported(tmp_path):
    """A whole package whose compiled copies are stand-ins (empty files that would fail to
    load) and whose manifest does not match: importing it warns and runs the sources."""
    root = tmp_path / "root"
    shutil.copytree(compiled.PACKAGE_DIR.parent, root / "hgresearch",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", compiled.MANIFEST))
    package = root / "hgresearch" / "sim"
    suffix = EXTENSION_SUFFIXES[0]
    for name in compiled.COMPILED_MODULES:
        (package / f"{name}{suffix}").write_bytes(b"")
    (package / compiled.MANIFEST).write_text("{}")
    script = ("import warnings; warnings.simplefilter('error');\n"
              "try:\n    import hgresearch.sim\nexcept RuntimeWarning as w:\n    print(w)\n")
    # -S: no site, so no .pth and no editable-install finder pointing at the checkout; the
    # dependencies come from the interpreter's package folders, after the copy
    env = {k: v for k, v in os.environ.items() if k != compiled.PURE_PYTHON_ENV}
    folders = [entry for entry in sys.path if entry and Path(entry).is_dir()
               and not (Path(entry) / "hgresearch").is_dir()]
    env["PYTHONPATH"] = os.pathsep.join([str(root), *folders])
    done = subprocess.run([sys.executable, "-S", "-c", script], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "was not built from the current sources" in done.stdout
    loaded = subprocess.run(
        [sys.executable, "-S", "-W", "ignore", "-c",
         "import hgresearch.sim as s; print(s.COMPILED, s.scheduler.__file__)"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split() == ["False", str(package / "scheduler.py")]
