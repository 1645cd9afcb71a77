"""Finding, verifying and fetching the pinned reference data."""

from __future__ import annotations

import functools
import http.server
import shutil
import socket
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hgresearch.cli import app
from hgresearch.cli.pipeline import run_reproduce
from hgresearch.data import reference
from hgresearch.data.reference import ReferenceDataError, fetch, reference_dir, verify


@pytest.fixture
def github_double(reference_dir, monkeypatch):
    """Test double: a local HTTP server stands in for GitHub (this machine has no route to it);
    the real fetch code (pooch, SHA-256 checks, cache layout) runs unchanged. Yields its URL,
    which ``HGRESEARCH_REFERENCE_URL`` points the downloads at."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler,
                                directory=str(reference_dir))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}"
    monkeypatch.setenv("HGRESEARCH_REFERENCE_URL", url)
    yield url
    server.shutdown()


@pytest.fixture
def no_local_copy(tmp_path, monkeypatch):
    """A machine without any copy: no environment variable, no ../shared beside the repository
    or the working folder, an empty download cache. Yields the cache's dataset folder."""
    monkeypatch.delenv("HGRESEARCH_REFERENCE_DIR", raising=False)
    monkeypatch.setenv("HGRESEARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(reference, "REPO_ROOT", tmp_path / "a" / "b")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "cache" / "reference" / "ionet-aibc2025"


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


def test_fetch_downloads_and_verifies(github_double, tmp_path, monkeypatch):
    monkeypatch.setenv("HGRESEARCH_CACHE_DIR", str(tmp_path / "cache"))
    target = fetch("ionet-aibc2025", progress=False)
    assert target == tmp_path / "cache" / "reference" / "ionet-aibc2025"
    assert len(list(target.glob("*.json"))) == 120
    verify(target)


def test_reproduce_downloads_when_no_local_copy_exists(github_double, no_local_copy,
                                                       reference_dir, tmp_path):
    """`reproduce` on a fresh machine fetches the data and goes on; an interrupted earlier
    download (some files, one of them truncated) is completed, not an error."""
    no_local_copy.mkdir(parents=True)
    names = sorted(p.name for p in reference_dir.glob("*.json"))
    for name in names[:3]:
        shutil.copy(reference_dir / name, no_local_copy / name)
    (no_local_copy / names[3]).write_bytes((reference_dir / names[3]).read_bytes()[:100])
    lines: list[str] = []
    run_reproduce(build_dir=tmp_path / "build", paper_dir=tmp_path / "paper",
                  echo=lines.append, notebooks=[])
    assert f"downloading IOG-Foundation/llm-inference-benchmarks@4990a807c6/results from " \
           f"{github_double}/ into {no_local_copy}" in lines[0]
    assert f"reference data: {no_local_copy}" in lines
    assert sorted(p.name for p in no_local_copy.glob("*.json")) == names
    verify(no_local_copy)


def test_reproduce_says_what_failed_when_the_download_is_unreachable(no_local_copy, tmp_path,
                                                                     monkeypatch):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("HGRESEARCH_REFERENCE_URL", f"http://127.0.0.1:{port}")
    result = CliRunner().invoke(app, ["reproduce", "--build-dir", str(tmp_path / "build"),
                                      "--paper-dir", str(tmp_path / "paper")])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    # before the error: the progress bar (stderr); the error's first line says what failed
    first, *advice = result.stderr[result.stderr.index("error: "):].strip().splitlines()
    assert first.startswith("error: could not download the reference data 'ionet-aibc2025'")
    assert f"http://127.0.0.1:{port}/ (host 127.0.0.1:{port})" in first
    assert "ConnectionError" in first
    assert any("export HGRESEARCH_REFERENCE_DIR=/path/to/results" in line for line in advice)
    assert any("--from /path/to/results" in line for line in advice)
    assert not (tmp_path / "build").exists()


def test_fetch_failure_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("HGRESEARCH_REFERENCE_URL", "http://127.0.0.1:9")  # nothing listens
    monkeypatch.setenv("HGRESEARCH_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ReferenceDataError, match="--from /path/to/results"):
        fetch("ionet-aibc2025", progress=False)


def test_cli_fetch_from_local_copy(reference_dir):
    result = CliRunner().invoke(app, ["data", "fetch", "ionet-aibc2025", "--from",
                                      str(reference_dir)])
    assert result.exit_code == 0, result.output
    assert f"verified copy at {reference_dir}" in result.output
    bad = CliRunner().invoke(app, ["data", "fetch", "--from", str(Path("/nonexistent"))])
    assert bad.exit_code == 2
