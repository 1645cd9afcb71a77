"""`make lab`: JupyterLab on the project's registered kernel, notebooks documented at the top."""

from __future__ import annotations

import ast
import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from hgresearch.paths import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))


def test_make_lab_registers_the_kernel_and_opens_the_notebooks(tmp_path):
    """A dry run (-n) with every target out of date (-B) shows the commands without running
    them: the install registers the kernel, then JupyterLab starts on notebooks/."""
    venv = tmp_path / "venv"
    result = subprocess.run(["make", "-n", "-B", "lab", f"VENV={venv}"], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    [register] = [i for i, line in enumerate(lines) if "scripts/install_kernel.py" in line]
    assert lines[register].startswith(f"{venv}/bin/python scripts/install_kernel.py")
    assert f'--display-name "hgresearch ({venv})"' in lines[register]
    [launch] = [i for i, line in enumerate(lines) if "jupyter lab" in line]
    assert launch > register
    assert lines[launch].startswith(f"{venv}/bin/jupyter lab")
    assert "notebooks" in lines[launch]
    assert not (venv / "bin").exists()  # nothing was run


def test_registered_kernel_is_this_python_and_starts_in_the_repository(tmp_path):
    """Registers the kernel into a temporary prefix and starts it from another folder, as
    Jupyter does (its working folder would be the notebook's)."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    script = runpy.run_path(str(REPO_ROOT / "scripts" / "install_kernel.py"))
    folder = script["install_kernel"](tmp_path / "prefix", REPO_ROOT)
    assert folder == tmp_path / "prefix" / "share" / "jupyter" / "kernels" / "hgresearch"
    spec = json.loads((folder / "kernel.json").read_text())
    assert spec["argv"][0] == sys.executable and spec["display_name"] == "hgresearch (.venv)"

    kernel = KernelManager(kernel_name="hgresearch",
                           kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(folder.parent)]))
    elsewhere = tmp_path / "notebooks"
    elsewhere.mkdir()
    kernel.start_kernel(cwd=str(elsewhere))
    client = kernel.client()
    printed: list[str] = []
    try:
        client.start_channels()
        client.wait_for_ready(timeout=60)
        client.execute_interactive(
            "import os, sys; print(os.getcwd()); print(sys.executable)", timeout=60,
            output_hook=lambda msg: printed.append(msg["content"].get("text", "")))
    finally:
        client.stop_channels()
        kernel.shutdown_kernel(now=True)
    cwd, executable = "".join(printed).split()
    assert Path(cwd) == REPO_ROOT
    assert os.path.realpath(executable) == os.path.realpath(sys.executable)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_on_the_project_kernel(path):
    kernelspec = json.loads(path.read_text())["metadata"]["kernelspec"]
    assert kernelspec["name"] == "hgresearch"
    assert kernelspec["display_name"] == "hgresearch (.venv)"


def _parameters(notebook: dict) -> dict[str, str]:
    """Name -> default (source text) of every assignment in the 'parameters' cell."""
    [cell] = [c for c in notebook["cells"] if "parameters" in c["metadata"].get("tags", [])]
    source = "".join(cell["source"])
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
            found[target.id] = ast.get_source_segment(source, node.value)
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_parameters_are_documented_at_the_top(path):
    """The first cell (markdown) lists every parameter with its default, as a table row
    ``| `name` | `default` | meaning |``."""
    notebook = json.loads(path.read_text())
    first = notebook["cells"][0]
    assert first["cell_type"] == "markdown"
    text = "".join(first["source"])
    documented = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`") and cells[0].endswith("`"):
            documented[cells[0].strip("`")] = (cells[1], cells[2])
    parameters = _parameters(notebook)
    assert sorted(documented) == sorted(parameters), path.name
    for name, default in parameters.items():
        shown, meaning = documented[name]
        assert shown == f"`{default}`", (path.name, name)
        assert meaning, (path.name, name)


def test_make_lab_takes_port_token_and_no_browser_and_allows_root_as_root(tmp_path):
    """`make lab PORT=… TOKEN=… NO_BROWSER=1` passes them to JupyterLab (a dry run); as root
    (uid 0, the usual container) --allow-root is added, since JupyterLab refuses root without
    it, and not otherwise."""
    venv = tmp_path / "venv"
    result = subprocess.run(["make", "-n", "-B", "lab", f"VENV={venv}", "PORT=8890",
                             "TOKEN=s3cret", "NO_BROWSER=1", "LAB_ARGS=--ServerApp.ip=0.0.0.0"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    # the recipe continues over several lines (backslash-newline): one command
    commands = result.stdout.replace("\\\n", " ").splitlines()
    [launch] = [line for line in commands if "jupyter lab" in line]
    for option in ("--ServerApp.port=8890", "--IdentityProvider.token=s3cret", "--no-browser",
                   "--ServerApp.ip=0.0.0.0"):
        assert option in launch
    assert ("--allow-root" in launch) == (os.geteuid() == 0)
    default = subprocess.run(["make", "-n", "-B", "lab", f"VENV={venv}"], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=60)
    [plain] = [line for line in default.stdout.replace("\\\n", " ").splitlines()
               if "jupyter lab" in line]
    assert "--no-browser" not in plain and "--IdentityProvider.token" not in plain


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_papermill_sees_every_parameter(path):
    """papermill's own reading of the parameters cell (what `-p` checks names against; it
    skips a line with more than one '=', as notebook 01's workload line once had in its
    comment, and then warns "Passed unknown parameter")."""
    import papermill

    notebook = json.loads(path.read_text())
    assert sorted(papermill.inspect_notebook(str(path))) == sorted(_parameters(notebook))


def test_jupyter_checkpoints_are_ignored():
    """`make lab` saves notebooks/.ipynb_checkpoints/; git must not offer them."""
    result = subprocess.run(["git", "check-ignore", "-q",
                             "notebooks/.ipynb_checkpoints/01_benchmark-checkpoint.ipynb"],
                            cwd=REPO_ROOT)
    assert result.returncode == 0


def test_notebook_01_says_how_to_pass_an_api_key():
    """Its parameter table names the environment variable the key is read from (never the
    key itself), and the sweep's config takes it."""
    notebook = json.loads((REPO_ROOT / "notebooks" / "01_benchmark.ipynb").read_text())
    assert _parameters(notebook)["api_key_env"] == '"OPENAI_API_KEY"'
    table = "".join(notebook["cells"][0]["source"])
    assert "| `api_key_env` |" in table and "never written" in table
    code = "".join(notebook["cells"][2]["source"])
    assert "api_key_env=api_key_env or None" in code
