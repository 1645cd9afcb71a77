"""Where the package and the repository it was checked out in are on disk (one definition).

``REPO_ROOT`` is meaningful for a source checkout (``pip install -e .``): the notebooks, the
manuscript and the committed run folders live there. An installed wheel has no repository; code
that needs one checks that ``REPO_ROOT / "pyproject.toml"`` exists.
"""

from __future__ import annotations

from pathlib import Path

#: The ``hgresearch`` package folder.
PACKAGE_DIR = Path(__file__).resolve().parent
#: The folder holding the package: the repository root for a source checkout.
REPO_ROOT = PACKAGE_DIR.parent
