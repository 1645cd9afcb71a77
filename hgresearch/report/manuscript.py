"""The manuscript: ``paper/paper.typ`` (Typst) compiled to ``paper/build/paper.pdf``.

Every number of the manuscript is read from ``paper/tables/*.csv`` by Typst itself (``csv()``),
none is typed by hand (``tests/test_manuscript.py`` checks the prose). The build is
deterministic: the document has no date, the PDF's creation time is fixed and only the fonts
bundled with Typst are used, so the same tables and figures give the same bytes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from hgresearch.errors import InputError
from hgresearch.paths import REPO_ROOT

#: The manuscript's source, in the repository's paper folder.
MANUSCRIPT_SOURCE = REPO_ROOT / "paper" / "paper.typ"
#: Where the PDF goes, relative to the paper folder.
MANUSCRIPT_PDF = Path("build") / "paper.pdf"
#: Fixed creation time of the PDF (seconds since the epoch): no build date in the output.
FIXED_TIMESTAMP_S = 0


class ManuscriptError(InputError):
    """Typst could not compile the manuscript (a table not yet generated, a syntax error):
    bad input, exit code 2, naming the source file."""


def build_paper(paper_dir: str | Path = REPO_ROOT / "paper", output: str | Path | None = None
                ) -> Path:
    """Compile ``<paper_dir>/paper.typ`` to ``output`` (default ``<paper_dir>/build/paper.pdf``)
    and return the PDF's path.

    A paper folder without ``paper.typ`` (``reproduce --paper-dir`` elsewhere) gets a copy of
    the repository's, so the manuscript is built from that folder's tables and figures.
    """
    import typst

    paper_dir = Path(paper_dir).resolve()
    source = paper_dir / "paper.typ"
    if not source.exists():
        if not MANUSCRIPT_SOURCE.exists():
            raise ManuscriptError(f"no manuscript (nor {MANUSCRIPT_SOURCE})", file=str(source))
        paper_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(MANUSCRIPT_SOURCE, source)
    output = Path(output) if output is not None else paper_dir / MANUSCRIPT_PDF
    try:
        pdf = typst.compile(str(source), root=str(paper_dir), ignore_system_fonts=True,
                            timestamp=FIXED_TIMESTAMP_S)
    except typst.TypstError as err:
        message = " ".join(str(err).split())
        raise ManuscriptError(f"typst could not compile it: {message}",
                              file=str(source)) from None
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(pdf)
    return output


def render_pages(pdf: str | Path, out_dir: str | Path, scale: float = 1.5,
                 pages: list[int] | None = None) -> list[Path]:
    """Render pages of ``pdf`` (all, or the 0-based ``pages``) to ``<out_dir>/page-N.png``, to
    look at the tables and figures. Needs ``pypdfium2`` (the ``dev`` extra)."""
    import pypdfium2 as pdfium

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    document = pdfium.PdfDocument(str(pdf))
    written = []
    try:
        for index in pages if pages is not None else range(len(document)):
            path = out_dir / f"page-{index + 1}.png"
            document[index].render(scale=scale).to_pil().save(path)
            written.append(path)
    finally:
        document.close()
    return written
