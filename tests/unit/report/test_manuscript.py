"""The manuscript (paper/paper.typ -> paper/build/paper.pdf): no number typed by hand in its
prose, a deterministic build that matches the committed PDF, and pages that render.

The rule for "no number typed by hand": the *markup* of paper.typ (what Typst typesets as text,
including content blocks inside code such as captions) carries no digit except inside the
proper names of :data:`NAMES`. Every number in the text is therefore a code expression reading
``paper/tables/*.csv``. Code (after ``#``), comments, strings and raw text may hold digits.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hgresearch.paths import REPO_ROOT
from hgresearch.report.manuscript import MANUSCRIPT_SOURCE, build_paper, render_pages

#: Proper names that contain digits; the only digits allowed in the manuscript's prose.
NAMES = ("AIBC 2025", "RTX 4090", "H100-PCIe", "H100", "Table 2", "Table 3", "Figure 1",
         "LLM")


def _skip_string(text: str, i: int) -> int:
    i += 1
    while i < len(text) and text[i] != '"':
        i += 2 if text[i] == "\\" else 1
    return i + 1


def _code(text: str, i: int, closer: str | None, out: list[str]) -> int:
    """Skip code from ``i`` up to the matching ``closer`` (or the end of the line when None,
    for ``#let``/``#set``/``#show`` lines); content blocks ``[...]`` inside are markup and their
    text goes to ``out``. Returns the index after the closer."""
    depth = 0
    while i < len(text):
        char = text[i]
        if char == '"':
            i = _skip_string(text, i)
            continue
        if text.startswith("//", i):
            i = text.find("\n", i) if text.find("\n", i) >= 0 else len(text)
            continue
        if char == "[":
            i = _markup(text, i + 1, "]", out)
            continue
        if char in "({":
            depth += 1
        elif char in ")}":
            if depth == 0 and closer == char:
                return i + 1
            depth -= 1
        elif char == "\n" and closer is None and depth == 0:
            return i
        i += 1
    return i


def _markup(text: str, i: int, closer: str | None, out: list[str]) -> int:
    """Collect markup text from ``i`` into ``out`` up to ``closer``; code after ``#`` is skipped
    (its content blocks collected). Returns the index after the closer."""
    while i < len(text):
        char = text[i]
        if closer and char == closer:
            return i + 1
        if text.startswith("//", i):
            i = text.find("\n", i) if text.find("\n", i) >= 0 else len(text)
        elif text.startswith("/*", i):
            i = text.index("*/", i) + 2
        elif char == "\\":
            i += 2
        elif char == "`":
            i = text.index("`", i + 1) + 1
        elif char == "[":
            i = _markup(text, i + 1, "]", out)
        elif char == "#":
            keyword = re.match(r"#(let|set|show|import|include)\b", text[i:])
            if keyword:
                i = _code(text, i + len(keyword.group(0)), None, out)
                continue
            name = re.match(r"#[A-Za-z_][\w.-]*", text[i:])
            if name is None:
                group = text[i + 1] if i + 1 < len(text) else ""
                i = _code(text, i + 2, {"(": ")", "{": "}"}[group], out) if group in "({" \
                    else i + 1
                continue
            i += len(name.group(0))
            # call arguments, trailing content blocks and field/method chains, as Typst reads them
            while i < len(text):
                if text[i] in "([":
                    i = _code(text, i + 1, ")", out) if text[i] == "(" else \
                        _markup(text, i + 1, "]", out)
                elif re.match(r"\.[A-Za-z_]", text[i:i + 2]):
                    i += len(re.match(r"\.[A-Za-z_][\w-]*", text[i:]).group(0))
                else:
                    break
        else:
            out.append(char)
            i += 1
    return i


def prose(source: str) -> str:
    """The text Typst typesets from ``source`` as markup (code and comments removed)."""
    out: list[str] = []
    _markup(source, 0, None, out)
    return "".join(out)


def hand_typed_digits(source: str) -> list[str]:
    """Snippets of the prose around every digit that is not part of a name of :data:`NAMES`."""
    text = prose(source)
    for name in NAMES:
        text = text.replace(name, " " * len(name))
    return [text[max(m.start() - 30, 0):m.end() + 30].replace("\n", " ")
            for m in re.finditer(r"\d", text)]


def test_the_digit_rule_has_teeth():
    assert len(hand_typed_digits("We measured 130 runs.")) == 3
    assert hand_typed_digits('We measured #runs.len() runs on #count("x") cards.') == []
    assert hand_typed_digits("#figure(image(\"f1.png\", width: 80%), caption: [7 rows])")
    assert hand_typed_digits("#let x = 3\nThe H100 and RTX 4090 of AIBC 2025.") == []
    assert hand_typed_digits("// 42 in a comment\n#text(size: 9pt)[fine]") == []
    assert hand_typed_digits("#text(size: 9pt)[size 9]")
    # a field chain after a call is code; the typed 7 is not
    assert hand_typed_digits("Row #rows.at(0).row differs in 7 cells.") == [
        "Row  differs in 7 cells."]


def test_manuscript_prose_has_no_hand_typed_number():
    found = hand_typed_digits(MANUSCRIPT_SOURCE.read_text(encoding="utf-8"))
    assert not found, f"digits typed by hand in paper/paper.typ prose: {found}"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build_paper(REPO_ROOT / "paper", tmp_path_factory.mktemp("paper") / "paper.pdf")


def test_build_is_deterministic_and_matches_the_committed_pdf(built, tmp_path):
    again = build_paper(REPO_ROOT / "paper", tmp_path / "again.pdf")
    assert built.read_bytes() == again.read_bytes()
    assert b"CreationDate" not in built.read_bytes() or b"D:1970" in built.read_bytes()
    committed = REPO_ROOT / "paper" / "build" / "paper.pdf"
    assert committed.read_bytes() == built.read_bytes(), "run `make paper` and commit the PDF"


def test_pages_render_with_tables_and_figures(built, tmp_path):
    """Renders the pages after the first (audit tables and the regenerated Figure 1) to PNG:
    one of the first of them has ink over most of its height (tables and a figure, not a few
    lines) and coloured pixels (the figure's series; the text is black)."""
    pil = pytest.importorskip("PIL.Image")
    found = []
    for page in render_pages(built, tmp_path, scale=1.0, pages=[1, 2]):
        image = pil.open(page).convert("RGB")
        width, height = image.size
        pixels = image.load()
        inked_rows = sum(any(min(pixels[x, y]) < 200 for x in range(0, width, 2))
                         for y in range(height))
        coloured = sum(max(pixels[x, y]) - min(pixels[x, y]) > 80
                       for x in range(0, width, 2) for y in range(0, height, 2))
        found.append((inked_rows > 0.5 * height, coloured > 200))
    assert (True, True) in found, found


def test_a_missing_table_is_one_error_naming_it(tmp_path):
    from hgresearch.report.manuscript import ManuscriptError

    with pytest.raises(ManuscriptError, match="audit_counts.csv|tables"):
        build_paper(tmp_path / "empty-paper", tmp_path / "out.pdf")


def test_cli_paper_build_without_tables_is_one_line_and_exit_2(tmp_path):
    from typer.testing import CliRunner

    from hgresearch.cli import app

    result = CliRunner().invoke(app, ["paper", "build", "--paper-dir", str(tmp_path / "p")])
    assert result.exit_code == 2
    assert "audit_counts.csv" in result.output and "Traceback" not in result.output
