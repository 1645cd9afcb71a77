"""YAML and JSON Lines readers: errors name the file and line."""

from __future__ import annotations

import pytest

from hgresearch.data.files import field_path, iter_json_lines, read_yaml
from hgresearch.errors import InputError


def test_yaml_lines_of_keys_and_items(tmp_path):
    path = tmp_path / "f.yaml"
    path.write_text("name: x\nservers:\n  - gpu_name: CPU\n    gpu_count: 2\n")
    doc = read_yaml(path)
    assert doc.data["servers"][0]["gpu_count"] == 2
    assert doc.line_of("servers", 0, "gpu_count") == 4
    assert doc.line_of("servers", 0, "missing") == 3  # nearest enclosing key
    err = doc.error("bad", "servers", 0, "gpu_count")
    assert (err.file, err.line, err.field) == (str(path), 4, "servers[0].gpu_count")


def test_malformed_yaml_names_the_line(tmp_path):
    path = tmp_path / "f.yaml"
    path.write_text("a: 1\nb: [1, 2\nc: 3\n")
    with pytest.raises(InputError) as err:
        read_yaml(path)
    assert err.value.file == str(path) and err.value.line is not None
    with pytest.raises(InputError, match="not found"):
        read_yaml(tmp_path / "nope.yaml")


def test_json_lines_name_the_bad_line_and_may_tolerate_a_cut_last_line(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2}\n{"a": 3')
    with pytest.raises(InputError) as err:
        list(iter_json_lines(path))
    assert err.value.line == 4
    assert [n for n, _ in iter_json_lines(path, tolerate_truncated_last=True)] == [1, 3]
    path.write_text('{"a": 1}\nnot json\n{"a": 2}\n')
    with pytest.raises(InputError) as err:
        list(iter_json_lines(path, tolerate_truncated_last=True))
    assert err.value.line == 2


def test_field_path():
    assert field_path(("servers", 0, "server", "dtype")) == "servers[0].server.dtype"
    assert field_path(()) == ""


@pytest.mark.parametrize("value, expected", [
    (["1x H100-PCIe", "2x RTX-4090"], ["1x H100-PCIe", "2x RTX-4090"]),  # -y / the default
    ('["1x H100-PCIe", "2x RTX-4090", "4x RTX-4090"]',  # -p: the README's example
     ["1x H100-PCIe", "2x RTX-4090", "4x RTX-4090"]),
    ("[32, 16, 8]", [32, 16, 8]),
    ('[["H100-PCIe", 1, 16.0], ["RTX-4090", 2, 4.0]]', [["H100-PCIe", 1, 16.0],
                                                         ["RTX-4090", 2, 4.0]]),
    ("1x H100-PCIe, 2x RTX-4090", ["1x H100-PCIe", "2x RTX-4090"]),
    ("50,100", [50, 100]),
    ("p99_ttft:500", ["p99_ttft:500"]),
    ("[]", []),
])
def test_a_list_parameter_from_papermill_is_a_list(value, expected):
    from hgresearch.data.files import parameter_list

    assert parameter_list(value, "hardware") == expected


def test_a_list_parameter_that_is_no_list_names_the_parameter():
    from hgresearch.data.files import parameter_list

    with pytest.raises(InputError) as caught:
        parameter_list('["unclosed"', "hardware")
    assert caught.value.field == "hardware"
    with pytest.raises(InputError, match="expected a list"):
        parameter_list(3, "hardware")
