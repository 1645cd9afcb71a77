"""Register this environment's Python as the Jupyter kernel ``hgresearch`` (``make install``).

JupyterLab (``make lab``) then runs the notebooks on the project's environment whatever other
``python3`` kernels the user has. The kernel starts in the repository root, as ``hgresearch
reproduce`` runs the notebooks there, so their relative default paths (``build``, ``paper``,
``data/raw/...``) mean the same in both; Jupyter itself would start it in ``notebooks/``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

KERNEL_NAME = "hgresearch"


def install_kernel(prefix: Path, working_dir: Path, name: str = KERNEL_NAME,
                   display_name: str = "hgresearch (.venv)") -> Path:
    """Write the kernel spec under ``<prefix>/share/jupyter/kernels/<name>``; returns its folder.

    The kernel is this interpreter (``sys.executable``) with ipykernel; it changes into
    ``working_dir`` before the first cell runs.
    """
    from ipykernel.kernelspec import install

    folder = Path(install(kernel_name=name, display_name=display_name, prefix=str(prefix)))
    spec_file = folder / "kernel.json"
    spec = json.loads(spec_file.read_text())
    spec["argv"].append(f"--IPKernelApp.exec_lines=import os; os.chdir({str(working_dir)!r})")
    spec_file.write_text(json.dumps(spec, indent=1) + "\n")
    return folder


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", type=Path, default=Path(sys.prefix),
                        help="environment to register the kernel in (default: this one)")
    parser.add_argument("--working-dir", type=Path, default=Path(__file__).resolve().parents[1],
                        help="folder the kernel starts in (default: the repository root)")
    parser.add_argument("--display-name", default="hgresearch (.venv)")
    args = parser.parse_args(argv)
    folder = install_kernel(args.prefix, args.working_dir.resolve(),
                            display_name=args.display_name)
    print(f"kernel {KERNEL_NAME!r} ({args.display_name}) registered in {folder}")


if __name__ == "__main__":
    main()
