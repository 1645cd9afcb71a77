"""The fleet file (hgresearch.sim.fleet_spec): read through hgresearch.data.files.read_yaml,
every error names the file, the line and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from hgresearch.errors import InputError
from hgresearch.sim.fleet_spec import bench_endpoints, load_fleet, parse_fleet


@pytest.mark.parametrize(("text", "line", "field"), [
    ("replicas:\n  - config: 14B on an H100\n", 2, "replicas[0].config"),
    ("replicas:\n  - config: M on 1x H100-PCIe\n    count: 0\n", 3, "replicas[0].count"),
    ("replicas:\n  - config: M on 1x H100-PCIe\n  - config: M on 1x H100-PCIe\n"
     "    step_time:\n      c0_s: -1\n", 5, "replicas[1].step_time.c0_s"),
    ("replicas:\n  - config: M on 1x H100-PCIe\n    count: 2\n    base_url: http://a:1\n",
     4, "replicas[0].base_url"),
    ("replicas:\n  - config: M on 1x H100-PCIe\n    colour: red\n", 3, "replicas[0].colour"),
    ("replicas: []\n", 1, "replicas"),
    ("replicas:\n  - config: M on 1x H100-PCIe\n    capacity_weight: 2\n"
     "  - config: M on 1x H100-PCIe\n", 4, "replicas[1]"),
])
def test_fleet_file_errors_name_file_line_field(tmp_path: Path, text: str, line: int,
                                                field: str) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_fleet(path)
    assert (err.value.file, err.value.line, err.value.field) == (str(path), line, field)
    assert str(err.value).startswith(f"{path}:{line}, field '{field}': ")


def test_malformed_or_missing_fleet_file_is_one_input_error(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text("replicas:\n  - config: [unclosed\n")
    with pytest.raises(InputError, match=r"fleet.yaml:\d+: malformed YAML") as err:
        load_fleet(path)
    assert err.value.line is not None and err.value.line >= 2
    with pytest.raises(InputError, match="fleet file not found"):
        load_fleet(tmp_path / "missing.yaml")


def test_fleet_content_built_in_code_is_checked_alike() -> None:
    fleet = parse_fleet({"replicas": [{"config": "M on 2x RTX-4090", "count": 2,
                                       "base_url": ["http://a:1", "http://b:1"]}]})
    assert [(r.name, r.num_gpus, r.file, r.line) for r in fleet.replicas] == [
        ("M on 2x RTX-4090 #1", 2, None, None), ("M on 2x RTX-4090 #2", 2, None, None)]
    assert [e["base_url"] for e in bench_endpoints(fleet, "m")] == ["http://a:1", "http://b:1"]
    with pytest.raises(InputError, match="field 'replicas\\[0\\].count'"):
        parse_fleet({"replicas": [{"config": "M on 1x H100-PCIe", "count": "two"}]})
