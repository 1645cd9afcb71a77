"""The package root: lazy re-exports for notebooks, and nothing imported eagerly."""

from __future__ import annotations

import subprocess
import sys

import pytest

import hgresearch


@pytest.mark.parametrize("name", sorted(hgresearch._EXPORTS))
def test_every_re_export_resolves_to_its_module_function(name):
    value = getattr(hgresearch, name)
    assert value.__module__ == hgresearch._EXPORTS[name]


def test_unknown_names_are_attribute_errors():
    with pytest.raises(AttributeError, match="no_such_thing"):
        hgresearch.no_such_thing  # noqa: B018


def test_importing_the_root_imports_no_layer():
    """``import hgresearch`` (done by every submodule import) stays cheap: no pandas, no layer."""
    code = ("import sys, hgresearch; "
            "print(sorted(m for m in sys.modules if m.startswith(('hgresearch.', 'pandas'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
