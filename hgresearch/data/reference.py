"""Find or fetch the paper's raw results (IOG-Foundation/llm-inference-benchmarks, pinned).

Lookup order of :func:`reference_dir` (first hit wins; every file is checked against the
SHA-256 sums shipped in ``hgresearch/data/catalogs/reference/<name>.sha256``):

1. an explicit folder (``--from DIR`` on the command line, ``source=`` here);
2. the environment variable ``HGRESEARCH_REFERENCE_DIR``;
3. a sibling checkout layout: ``../shared/reference/<name>/results`` next to the repository;
4. the download cache ``$HGRESEARCH_CACHE_DIR/reference/<name>`` (default ``.cache/`` in the
   repository, git-ignored; the user's cache folder for an installed package), filled by
   ``hgresearch data fetch <name>`` — and by ``hgresearch reproduce``
   (:func:`find_or_fetch`) when none of the four holds a copy.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from hgresearch.data.catalogs import CHECKSUM_DIR
from hgresearch.errors import HgResearchError
from hgresearch.paths import REPO_ROOT


@dataclass(frozen=True)
class ReferenceDataset:
    """A public raw-results folder pinned to a commit."""

    name: str
    repository: str
    commit: str
    folder: str

    @property
    def base_url(self) -> str:
        """Where the raw files are downloaded from (override: ``HGRESEARCH_REFERENCE_URL``)."""
        override = os.environ.get("HGRESEARCH_REFERENCE_URL")
        if override:
            return override.rstrip("/") + "/"
        return (f"https://raw.githubusercontent.com/{self.repository}/{self.commit}/"
                f"{self.folder}/")

    @property
    def checksum_file(self) -> Path:
        """The SHA-256 manifest of the data set (package data)."""
        return CHECKSUM_DIR / f"{self.name}.sha256"

    def checksums(self) -> dict[str, str]:
        """File name -> SHA-256 hex digest, from the committed manifest."""
        sums = {}
        for line in self.checksum_file.read_text().splitlines():
            if line.strip():
                digest, name = line.split(maxsplit=1)
                sums[name.strip()] = digest
        return sums


DATASETS = {
    "ionet-aibc2025": ReferenceDataset(
        name="ionet-aibc2025",
        repository="IOG-Foundation/llm-inference-benchmarks",
        commit="4990a807c6f1971edda635c18d98550059782eb8",
        folder="results",
    ),
}


class ReferenceDataError(HgResearchError, RuntimeError):
    """The reference data could not be found, fetched or verified."""

    exit_code = 2


class ReferenceDataMissing(ReferenceDataError):
    """No copy was found, or only an incomplete download: :func:`fetch` can (re)fill the cache."""


def _dataset(name: str) -> ReferenceDataset:
    if name not in DATASETS:
        raise ReferenceDataError(f"unknown reference dataset {name!r}; known: {sorted(DATASETS)}")
    return DATASETS[name]


def cache_dir() -> Path:
    """Root of the download cache: ``HGRESEARCH_CACHE_DIR``, else ``<repo>/.cache`` in a source
    checkout, else the user's cache folder (an installed package must not write into
    ``site-packages``)."""
    if os.environ.get("HGRESEARCH_CACHE_DIR"):
        return Path(os.environ["HGRESEARCH_CACHE_DIR"])
    if (REPO_ROOT / "pyproject.toml").exists():
        return REPO_ROOT / ".cache"
    import pooch

    return Path(pooch.os_cache("hgresearch"))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(directory: Path, name: str = "ionet-aibc2025") -> None:
    """Check every file of the manifest exists in ``directory`` with the right SHA-256."""
    dataset = _dataset(name)
    problems = []
    for file, digest in dataset.checksums().items():
        path = directory / file
        if not path.exists():
            problems.append(f"missing: {file}")
        elif sha256_of(path) != digest:
            problems.append(f"checksum mismatch: {file}")
    if problems:
        shown = "\n  ".join(problems[:10])
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise ReferenceDataError(
            f"{directory} is not a faithful copy of {dataset.repository}@{dataset.commit[:10]}/"
            f"{dataset.folder} ({len(problems)} problem(s)):\n  {shown}{more}")


def _candidates(name: str, source: str | Path | None) -> list[tuple[str, Path]]:
    dataset = _dataset(name)
    found: list[tuple[str, Path]] = []
    if source is not None:
        found.append(("--from", Path(source)))
    env = os.environ.get("HGRESEARCH_REFERENCE_DIR")
    if env:
        found.append(("HGRESEARCH_REFERENCE_DIR", Path(env)))
    for root in (REPO_ROOT.parent, Path.cwd().parent):
        found.append(("../shared", root / "shared" / "reference" / name / dataset.folder))
    found.append(("cache", cache_dir() / "reference" / name))
    return found


def reference_dir(name: str = "ionet-aibc2025", source: str | Path | None = None) -> Path:
    """Folder holding the verified raw results of ``name`` (see the module doc for the order).

    An explicitly named folder (``source`` or the environment variable) must be valid: it is
    an error, not a fallthrough, when it is missing or fails verification.
    """
    for origin, path in _candidates(name, source):
        explicit = origin in ("--from", "HGRESEARCH_REFERENCE_DIR")
        # A folder holding results/ is accepted as well as results/ itself.
        if explicit and path.is_dir() and (path / _dataset(name).folder).is_dir():
            path = path / _dataset(name).folder
        if not path.is_dir():
            if explicit:
                raise ReferenceDataError(f"{origin} names {path}, which is not a folder")
            continue
        if origin == "cache":
            try:
                verify(path, name)
            except ReferenceDataError as err:  # an interrupted download: fetch() resumes it
                raise ReferenceDataMissing(
                    f"the download cache is incomplete: {err}\n"
                    f"Complete it with `hgresearch data fetch {name}`.") from None
        else:
            verify(path, name)
        return path
    dataset = _dataset(name)
    raise ReferenceDataMissing(
        f"no copy of the reference data {name!r} was found. Get one with\n"
        f"    hgresearch data fetch {name}\n"
        f"(downloads {dataset.repository}@{dataset.commit[:10]}/{dataset.folder} into "
        f"{cache_dir() / 'reference' / name}), or point to a local copy with\n"
        f"    export HGRESEARCH_REFERENCE_DIR=/path/to/{dataset.folder}\n"
        f"or `--from /path/to/{dataset.folder}` on the command line.")


def fetch(name: str = "ionet-aibc2025", source: str | Path | None = None,
          progress: bool = True) -> Path:
    """Make a verified copy available and return its folder.

    With ``source`` the local folder is verified and used as is. Otherwise each file of the
    manifest is downloaded with :mod:`pooch` (hash-checked, skipped when already cached).
    """
    if source is not None:
        return reference_dir(name, source)
    import pooch
    from tqdm import tqdm

    dataset = _dataset(name)
    target = cache_dir() / "reference" / name
    registry = {file: f"sha256:{digest}" for file, digest in dataset.checksums().items()}
    fetcher = pooch.create(path=target, base_url=dataset.base_url, registry=registry,
                           retry_if_failed=2)
    file = sorted(registry)[0]
    pooch_logger = pooch.get_logger()
    level = pooch_logger.level
    # One progress bar for the whole set instead of a "Downloading file ..." line per file.
    pooch_logger.setLevel(logging.WARNING)
    try:
        with tqdm(sorted(registry), desc=f"fetch {name}", unit="file",
                  disable=not progress) as files:
            for file in files:
                fetcher.fetch(file, progressbar=False)
    except Exception as err:  # network, HTTP or hash errors: say what failed and what to do
        raise ReferenceDataError(_download_failed(dataset, file, err)) from None
    finally:
        pooch_logger.setLevel(level)
    verify(target, name)
    return target


def _download_failed(dataset: ReferenceDataset, file: str, err: Exception) -> str:
    host = urlsplit(dataset.base_url).netloc or dataset.base_url
    return (
        f"could not download the reference data {dataset.name!r}: fetching {file} from "
        f"{dataset.base_url} (host {host}) failed with {type(err).__name__}: {err}\n"
        f"If this machine cannot reach {host}, copy {dataset.repository}@{dataset.commit[:10]}/"
        f"{dataset.folder} by other means and point to the copy with\n"
        f"    export HGRESEARCH_REFERENCE_DIR=/path/to/{dataset.folder}\n"
        f"or `--from /path/to/{dataset.folder}` on the command line "
        f"(files already downloaded stay in {cache_dir() / 'reference' / dataset.name}).")


def find_or_fetch(name: str = "ionet-aibc2025", source: str | Path | None = None,
                  progress: bool = True, echo: Callable[[str], None] = print) -> Path:
    """The folder :func:`reference_dir` finds; when it finds no copy (or an interrupted
    download), download one with :func:`fetch` first, saying so through ``echo``.

    Explicitly named folders that are invalid and local copies that fail verification are
    errors, never replaced by a download.
    """
    try:
        return reference_dir(name, source)
    except ReferenceDataMissing:
        dataset = _dataset(name)
        echo(f"no complete local copy of the reference data {name!r}: downloading "
             f"{dataset.repository}@{dataset.commit[:10]}/{dataset.folder} from "
             f"{dataset.base_url} into {cache_dir() / 'reference' / name}")
    return fetch(name, progress=progress)
