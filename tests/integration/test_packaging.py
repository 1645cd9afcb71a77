"""A plain (non-editable) install works: the catalogs and the reference checksums are package
data, and the simulator's hot path comes compiled (setup.py, hgresearch/sim/compiled.py).
Builds a wheel from the package sources alone, installs it into a temporary venv and imports it
from outside the repository."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from hgresearch.paths import REPO_ROOT

CHECK = textwrap.dedent("""
    import json, sys, sysconfig
    from pathlib import Path
    import hgresearch
    import hgresearch.sim
    from hgresearch.data import catalogs, reference
    loaders = [catalogs.hardware_catalog, catalogs.price_catalog, catalogs.model_catalog,
               catalogs.power_model_catalog, catalogs.grid_catalog, catalogs.embodied_catalog,
               catalogs.printed_table2, catalogs.printed_table3, catalogs.printed_figure1_labels,
               catalogs.printed_claims]
    print(json.dumps({
        "package": hgresearch.__file__,
        "purelib": sysconfig.get_paths()["purelib"],
        "rows": [len(load()) for load in loaders],
        "checksums": len(reference.DATASETS["ionet-aibc2025"].checksums()),
        "cache_dir": str(reference.cache_dir()),
        "compiled": hgresearch.sim.COMPILED,
        "scheduler": hgresearch.sim.scheduler.__file__,
    }))
""")


def test_wheel_install_finds_catalogs_and_checksums(tmp_path):
    """Offline: the wheel is built without build isolation (setuptools and wheel come with the
    dev extras) and installed with --no-deps; the dependencies are the running interpreter's,
    reached through .pth lines (which add the folders but run none of their .pth files, so a
    development install of hgresearch there stays invisible; folders holding an hgresearch
    package, such as the checkout itself, are left out)."""
    missing = [name for name in ("setuptools", "wheel") if importlib.util.find_spec(name) is None]
    assert not missing, f"the dev extras' build tools are missing ({missing}): run make install"
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    # the sources only: not the checkout's own compiled copies and their manifest
    shutil.copytree(REPO_ROOT / "hgresearch", source / "hgresearch",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "_compiled_sources.json"))
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "HGRESEARCH_CACHE_DIR", "PIP_REQUIRE_VIRTUALENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"

    def run(*command: str | Path, cwd: Path = tmp_path) -> str:
        done = subprocess.run([str(part) for part in command], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
        "-w", tmp_path / "dist", source)
    [wheel] = (tmp_path / "dist").glob("hgresearch-*.whl")
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    purelib = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
                   .strip())
    dependencies = [entry for entry in sys.path if entry and Path(entry).is_dir()
                    and not (Path(entry) / "hgresearch").is_dir()]
    (purelib / "zz_dependencies.pth").write_text("\n".join(dependencies) + "\n")
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
        wheel)
    shutil.rmtree(source)  # nothing may be read from the sources any more

    result = json.loads(run(python, "-c", CHECK, cwd=tmp_path).strip().splitlines()[-1])
    assert Path(result["package"]).is_relative_to(purelib), result["package"]
    assert all(rows > 0 for rows in result["rows"]), result["rows"]
    assert result["rows"][-4:] == [20, 2, 2, 10]  # what the paper printed (paper_printed/)
    assert result["checksums"] == 120
    # mypy (mypyc) comes with the dev extras, a C compiler with the machine: the wheel carries
    # the compiled simulator and runs it
    assert result["compiled"], result["scheduler"]
    assert Path(result["scheduler"]).is_relative_to(purelib), result["scheduler"]
    assert not result["scheduler"].endswith(".py"), result["scheduler"]
    # an installed package keeps its download cache out of site-packages
    assert not Path(result["cache_dir"]).is_relative_to(purelib), result["cache_dir"]
