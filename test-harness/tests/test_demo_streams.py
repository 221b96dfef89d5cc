"""The demo upstream's stream controls, through the helpers that streaming tests use. The
streaming methods themselves, and what each mode does to them, are checked against the same
binary in Rust (test-harness/tests/demo_streams.rs): tonic speaks gRPC, this client does not."""

from __future__ import annotations

import json

import httpx2
import pytest

from processes import Upstream


@pytest.fixture
def own_upstream():
    """An upstream of this test's own, so that no other test's stream is counted."""
    server = Upstream().start()
    yield server
    server.stop()


def test_stream_counts_start_at_zero_and_every_mode_is_accepted(own_upstream: Upstream) -> None:
    assert own_upstream.streams() == {"open": 0, "opened": 0, "cancelled": 0}
    for mode in ("many", "error_after=3", "never_end", "normal"):
        own_upstream.stream_mode(mode)
    own_upstream.reset()
    assert own_upstream.streams() == {"open": 0, "opened": 0, "cancelled": 0}


@pytest.mark.parametrize("mode", ["sometimes", "error_after=", "error_after=-1", ""])
def test_an_unknown_stream_mode_is_refused_and_says_what_to_write(own_upstream: Upstream, mode: str) -> None:
    with pytest.raises(httpx2.HTTPStatusError) as refused:
        own_upstream.stream_mode(mode)
    assert refused.value.response.status_code == 400
    assert refused.value.response.text == (
        f"stream mode {json.dumps(mode)}: write normal, many, count=N, error_after=N (N a count) or never_end")
