"""An unreachable Ray address is an error within seconds, not a hang (issue 20, item 4): the
address is probed before Ray is asked to join it; ``ray://`` without Ray Client says what to
install instead of a 127-line traceback."""

from __future__ import annotations

import socket
import time

import pytest

from hgresearch.errors import InputError
from hgresearch.executors import Executor, ExecutorKind, probe_ray_address


def _closed_port() -> int:
    with socket.socket() as sock:  # bound, then closed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_closed_port_is_refused_in_one_line_with_a_progress_line_first() -> None:
    lines: list[str] = []
    address = f"127.0.0.1:{_closed_port()}"
    with pytest.raises(InputError) as caught:
        probe_ray_address(address, echo=lines.append)
    assert lines == [f"connecting to the Ray cluster at {address} (up to 10 s) ..."]
    message = str(caught.value)
    assert "\n" not in message and f"cannot reach the Ray cluster at {address}" in message
    assert caught.value.field == "address"


@pytest.mark.timing
def test_an_address_that_never_answers_gives_up_at_the_timeout() -> None:
    """A listening socket whose backlog is full stands in for a host that drops packets."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        fillers = []
        try:
            for _ in range(8):  # fill the backlog; later connects wait (Linux)
                filler = socket.socket()
                filler.setblocking(False)
                filler.connect_ex(("127.0.0.1", port))
                fillers.append(filler)
            start = time.monotonic()
            try:
                probe_ray_address(f"127.0.0.1:{port}", timeout_s=1.0, echo=lambda line: None)
            except InputError as err:
                assert "after" in str(err)
            assert time.monotonic() - start < 5  # bounded either way
        finally:
            for filler in fillers:
                filler.close()


def test_malformed_addresses_and_those_ray_resolves() -> None:
    with pytest.raises(InputError, match="expected HOST:PORT"):
        probe_ray_address("just-a-host", echo=lambda line: None)
    for address in (None, "auto"):
        probe_ray_address(address, echo=pytest.fail)  # Ray's to resolve: no probe, no line


def test_ray_client_without_grpc_says_what_to_install(monkeypatch) -> None:
    """grpcio is made to look absent (find_spec answers None for it), as in an environment
    with plain `ray` and no `ray[client]`."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "grpc" else real(name, *a))
    with pytest.raises(InputError, match=r"ray\[client\]"):
        probe_ray_address("ray://127.0.0.1:10001", echo=lambda line: None)


def test_the_ray_executor_map_refuses_a_closed_port_before_ray_init() -> None:
    """Ray itself would retry the address for minutes; the probe answers first."""
    pytest.importorskip("ray")
    with pytest.raises(InputError, match="cannot reach the Ray cluster"):
        Executor(ExecutorKind.RAY, address=f"127.0.0.1:{_closed_port()}").map(abs, [1, 2])
    import ray

    assert not ray.is_initialized()
