"""``hgresearch bench`` and ``energy`` options: a bad value is one line naming the option, exit
code 2, and no run folder; an unusable server exits 2 after the warm-up; a point where every
request failed exits 1.

Servers are the local streaming test double (:mod:`hgresearch.bench.server.mock`); no vLLM here.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from hgresearch.bench.server.mock import MockServerConfig, serve_in_thread
from hgresearch.cli import app

pytestmark = pytest.mark.filterwarnings("ignore:telemetry unavailable")

QUIET = ["--no-telemetry", "--no-progress", "--idle-baseline-s", "0"]


def _bench(out, *args: str, url: str = "http://127.0.0.1:9"):
    """Invoke ``bench`` (nothing listens at the default URL: bad values must stop first)."""
    return CliRunner().invoke(app, ["bench", "--base-url", url, "--model", "test-model",
                                    "--num-prompts", "3", "--workload",
                                    "random:input_len=4,output_len=2", *QUIET, "-o", str(out),
                                    *args])


@pytest.mark.parametrize("args,message", [
    (["--qps", "20,,8"], "error: --qps: empty value between commas in '20,,8'"),
    (["--qps", "abc"], "error: --qps: 'abc' is not a number"),
    (["--goodput", "ttft:abc"], "error: --goodput: 'abc' is not a number of milliseconds"),
    (["--timeout-s", "0"], "error: --timeout-s: expected a number > 0 s, got 0.0"),
    (["--workload", "random:input_len=-5"], "error: --workload: random workload: input_len "
                                            "must be an integer >= 1, got -5"),
    (["--workload", "random:output_len=0"], "error: --workload: random workload: output_len "
                                            "must be an integer >= 1, got 0"),
    (["--workload", "random:input_len=abc"], "error: --workload: random workload: input_len "
                                             "must be an integer >= 1, got 'abc'"),
    (["--workload", "sharegpt:path=missing.json"], "error: --workload: sharegpt workload: no "
                                                   "such file: missing.json"),
    (["--num-prompts", "0"], "error: --num-prompts: expected an integer >= 1, got 0"),
    (["--warmup", "-1"], "error: --warmup: expected an integer >= 0, got -1"),
])
def test_bad_value_is_one_line_naming_the_option_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "out"
    result = _bench(out, *args)
    assert result.exit_code == 2, result.output
    assert result.output.strip().startswith(message)
    assert len(result.output.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("option,value", [("--endpoint", "embeddings"),
                                          ("--arrival", "poisson-ish"),
                                          ("--http-client", "curl")])
def test_fixed_choices_are_enums(tmp_path, option, value):
    result = _bench(tmp_path / "out", option, value)
    assert result.exit_code == 2
    assert option in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_energy_tdp_is_a_choice(tmp_path):
    result = CliRunner().invoke(app, ["energy", str(tmp_path), "--tdp", "foo"])
    assert result.exit_code == 2
    assert "--tdp" in result.output and "datasheet" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_wrong_model_exits_2_after_the_warmup_with_what_to_change(tmp_path):
    with serve_in_thread(MockServerConfig(ttft_ms=1, itl_ms=1, strict_model=True)) as url:
        result = _bench(tmp_path / "out", "--model", "llama", "--qps", "50,20", url=url)
    assert result.exit_code == 2, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("error: all 1 warm-up request(s) failed")
    assert "HTTP 404" in last and "pass --model test-model" in last
    assert not (tmp_path / "out" / "qps20").exists()


def test_point_where_every_request_failed_exits_1_and_keeps_its_folder(tmp_path):
    with serve_in_thread(MockServerConfig(ttft_ms=1, itl_ms=1, error_rate=1.0)) as url:
        result = _bench(tmp_path / "out", "--qps", "50", "--warmup", "0", url=url)
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines()[-1] == (
        "error: qps 50.0: all 3 requests failed (3 http_error); their run folders are kept")
    assert (tmp_path / "out" / "qps50" / "summary.json").exists()


def test_resume_of_a_finished_run_with_a_changed_seed_is_refused(tmp_path):
    with serve_in_thread(MockServerConfig(ttft_ms=1, itl_ms=1)) as url:
        first = _bench(tmp_path / "out", "--qps", "50", url=url)
        assert first.exit_code == 0, first.output
        again = _bench(tmp_path / "out", "--qps", "50", "--seed", "9", "--resume", url=url)
    assert again.exit_code == 2
    assert "cannot resume a run with different parameters: seed (run has 0, asked 9)" in \
        again.output
