"""Finding, verifying and fetching the pinned reference data."""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from pathlib import Path

import pytest

from hgresearch import reference
from hgresearch.reference import ReferenceDataError, fetch, reference_dir, verify


def test_manifest_covers_the_local_copy(reference_dir):
    sums = reference.DATASETS["ionet-aibc2025"].checksums()
    assert len(sums) == 120
    assert sorted(p.name for p in reference_dir.glob("*.json")) == sorted(sums)


def test_explicit_folder_is_verified(reference_dir, tmp_path):
    copy = tmp_path / "results"
    shutil.copytree(reference_dir, copy)
    assert reference.reference_dir(source=copy) == copy
    assert reference.reference_dir(source=tmp_path) == copy  # parent of results/ accepted
    victim = sorted(copy.glob("*.json"))[3]
    victim.write_bytes(victim.read_bytes()[:-5] + b"XXXX\n")
    with pytest.raises(ReferenceDataError, match=f"checksum mismatch: {victim.name}"):
        reference.reference_dir(source=copy)
    victim.unlink()
    with pytest.raises(ReferenceDataError, match=f"missing: {victim.name}"):
        verify(copy)


def test_env_variable_and_helpful_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HGRESEARCH_REFERENCE_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(ReferenceDataError, match="HGRESEARCH_REFERENCE_DIR names"):
        reference_dir()
    monkeypatch.delenv("HGRESEARCH_REFERENCE_DIR")
    monkeypatch.setenv("HGRESEARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(reference, "REPO_ROOT", tmp_path / "a" / "b")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ReferenceDataError) as info:
        reference_dir()
    assert "hgresearch data fetch ionet-aibc2025" in str(info.value)
    assert "HGRESEARCH_REFERENCE_DIR" in str(info.value)


def test_fetch_downloads_and_verifies(reference_dir, tmp_path, monkeypatch):
    """Test double: a local HTTP server stands in for GitHub (this machine has no route to it);
    the real fetch code (pooch, SHA-256 checks, cache layout) runs unchanged."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler,
                                directory=str(reference_dir))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("HGRESEARCH_REFERENCE_URL", f"http://127.0.0.1:{server.server_port}")
        monkeypatch.setenv("HGRESEARCH_CACHE_DIR", str(tmp_path / "cache"))
        target = fetch("ionet-aibc2025", progress=False)
        assert target == tmp_path / "cache" / "reference" / "ionet-aibc2025"
        assert len(list(target.glob("*.json"))) == 120
        verify(target)
    finally:
        server.shutdown()


def test_fetch_failure_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("HGRESEARCH_REFERENCE_URL", "http://127.0.0.1:9")  # nothing listens
    monkeypatch.setenv("HGRESEARCH_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ReferenceDataError, match="--from DIR"):
        fetch("ionet-aibc2025", progress=False)


def test_cli_fetch_from_local_copy(reference_dir):
    from typer.testing import CliRunner

    from hgresearch.cli import app

    result = CliRunner().invoke(app, ["data", "fetch", "ionet-aibc2025", "--from",
                                      str(reference_dir)])
    assert result.exit_code == 0, result.output
    assert f"verified copy at {reference_dir}" in result.output
    bad = CliRunner().invoke(app, ["data", "fetch", "--from", str(Path("/nonexistent"))])
    assert bad.exit_code == 2
