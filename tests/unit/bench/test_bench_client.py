"""Record building from a streamed answer (no network: the bytes are given)."""

from __future__ import annotations

import json

import pytest

from hgresearch.bench.client import ClientOptions, _record
from hgresearch.bench.prompts import RequestSpec


def _stream(usage: dict | None) -> list[tuple[int, bytes]]:
    """An SSE body of two one-token events, then the final usage event (when given)."""
    events = [{"choices": [{"index": 0, "text": " a"}]}, {"choices": [{"index": 0, "text": " b"}]}]
    if usage is not None:
        events.append({"choices": [], "usage": usage})
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return [(1_000, body + b"data: [DONE]\n\n")]


@pytest.mark.parametrize("usage,prompt_tokens,source", [
    ({"prompt_tokens": 0, "completion_tokens": 2}, 0, "server"),  # 0 is the server's value
    ({"prompt_tokens": 7, "completion_tokens": 2}, 7, "server"),
    ({"completion_tokens": 2}, 12, "client_estimate"),           # missing: the estimate
    ({"prompt_tokens": None, "completion_tokens": 2}, 12, "client_estimate"),
    (None, 12, "client_estimate"),
])
def test_prompt_tokens_keep_the_servers_value_and_say_where_they_came_from(
        usage, prompt_tokens, source):
    spec = RequestSpec(index=0, prompt="p", prompt_len=12, output_len=2)
    rec = _record(spec, ClientOptions(base_url="http://x", model="m"), 0, 2_000, 200,
                  _stream(usage), None, None, ())
    assert rec["success"] is True
    assert rec["prompt_tokens"] == prompt_tokens
    assert rec["prompt_tokens_source"] == source
    assert rec["output_tokens"] == 2
