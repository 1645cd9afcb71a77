"""The command line: one package, one error handler, one option name per meaning."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from hgresearch.cli import app
from hgresearch.cli.errors import handle_errors
from hgresearch.errors import HgResearchError, InputError
from hgresearch.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "hgresearch"


def _modules(folder: Path):
    return [p for p in sorted(folder.rglob("*.py")) if "__pycache__" not in p.parts]


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_only_the_cli_package_imports_typer():
    outside = [p.relative_to(PACKAGE).as_posix() for p in _modules(PACKAGE)
               if "cli" not in p.relative_to(PACKAGE).parts[:1] and "typer" in _imports(p)]
    assert outside == []


def test_exit_codes_come_from_the_one_handler():
    """No command builds its own `error: ...` + Exit block: the handler is the only place."""
    for path in _modules(PACKAGE / "cli"):
        if path.name == "errors.py":
            continue
        text = path.read_text(encoding="utf-8")
        assert 'echo(f"error:' not in text, path
        assert "except InputError" not in text and "Exit(2)" not in text, path


def _runner_app(exc: BaseException) -> typer.Typer:
    demo = typer.Typer()

    @demo.command()
    @handle_errors
    def go() -> None:
        raise exc

    @demo.command()
    def other() -> None:  # a second command keeps typer from collapsing to one
        pass

    return demo


@pytest.mark.parametrize(("exc", "code", "text"), [
    (InputError("expected a number", file="runs.jsonl", line=3, field="duration"), 2,
     "error: runs.jsonl:3, field 'duration': expected a number"),
    (FileNotFoundError(2, "No such file or directory", "x.json"), 2,
     "error: x.json: No such file or directory"),
    (HgResearchError("the server died"), 1, "error: the server died"),
])
def test_handler_prints_one_line_and_the_error_exit_code(exc, code, text):
    result = CliRunner().invoke(_runner_app(exc), ["go"])
    assert result.exit_code == code
    assert result.output.strip() == text
    assert "Traceback" not in result.output


def test_handler_keeps_the_traceback_of_a_bug():
    result = CliRunner().invoke(_runner_app(ZeroDivisionError("bug")), ["go"])
    assert isinstance(result.exception, ZeroDivisionError)


def _options(command_path: list[str]) -> list[str]:
    import click

    group = typer.main.get_command(app)
    ctx = click.Context(group)
    command = group
    for name in command_path:
        command = command.get_command(ctx, name)
    return [opt for param in command.params for opt in getattr(param, "opts", [])]


@pytest.mark.parametrize("command_path", [["ingest"], ["bench"], ["energy"], ["fit"],
                                          ["sweep"], ["model", "synth"]])
def test_output_is_always_dash_o_output(command_path):
    options = _options(command_path)
    assert "-o" in options and "--output" in options
    assert not {"--out", "--out-dir", "--tables-dir"} & set(options)


def test_every_command_has_help():
    import click

    group = typer.main.get_command(app)
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command.help, name
        if _is_group(command):
            for sub in command.list_commands(ctx):
                assert command.get_command(ctx, sub).help, f"{name} {sub}"


def test_bad_input_exits_2_without_traceback_as_a_process(tmp_path):
    """The console entry point itself (not CliRunner): missing input is one line, exit 2."""
    result = subprocess.run([sys.executable, "-m", "hgresearch", "ingest",
                             str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "r.csv")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().startswith("error:")
    assert len(result.stderr.strip().splitlines()) == 1


def _is_group(command: object) -> bool:
    # Typer's groups are click groups of the click Typer ships with: no isinstance check
    return hasattr(command, "list_commands")


def _registered(group, prefix: str = "") -> set[str]:
    """Every command name of the click group (``GROUP COMMAND`` inside a group)."""
    import click

    ctx = click.Context(group)
    names = set()
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if _is_group(command):
            names |= _registered(command, f"{prefix}{name} ")
        else:
            names.add(prefix + name)
    return names


def test_every_command_is_registered_from_the_one_list_and_listed_in_the_docstring():
    import hgresearch.cli as cli

    listed = {name for name, _ in cli.COMMANDS}
    assert len(listed) == len(cli.COMMANDS)  # no name twice
    assert _registered(typer.main.get_command(app)) == listed
    table = {name for row in (cli.__doc__ or "").splitlines() if row.startswith("| ``")
             for name in re.findall(r"``([a-z ]+)``", row.split("|")[1])}
    assert table == listed


def test_command_modules_register_nothing_themselves():
    """Registration is explicit, in cli/__init__.py: importing a command module adds nothing."""
    for path in _modules(PACKAGE / "cli"):
        if path.name == "__init__.py":
            continue
        text = path.read_text(encoding="utf-8")
        for call in ("typer.Typer(", ".add_typer(", ".command(", "from hgresearch.cli import"):
            assert call not in text, f"{path.name}: {call}"


def test_the_readme_documents_every_command():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    import hgresearch.cli as cli

    missing = [name for name, _ in cli.COMMANDS if f"`hgresearch {name}" not in readme]
    assert missing == []
    assert not re.search(r"fleet plan\b", readme)  # the planner is `hgresearch plan`
