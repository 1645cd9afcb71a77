"""Work estimated over the limits is refused before it starts, in one line naming the limit."""

import pytest

from hgresearch.bounds import MEMORY_LIMIT_BYTES, TIME_LIMIT_S, WorkEstimate, check_work
from hgresearch.errors import InputError


def test_over_memory_is_refused_naming_the_limit() -> None:
    with pytest.raises(InputError) as err:
        check_work(WorkEstimate("simulate 10,000,000 requests", 11e9, 10.0))
    message = str(err.value)
    assert "\n" not in message
    assert "11.0 GB" in message and "limit 4.0 GB" in message and "--allow-large" in message


def test_over_time_is_refused_and_allow_large_lets_it_run() -> None:
    estimate = WorkEstimate("plan 88,879 replicas", 1e6, 2 * TIME_LIMIT_S)
    with pytest.raises(InputError, match=r"2\.0 h \(limit 1\.0 h\)"):
        check_work(estimate)
    check_work(estimate, allow_large=True)


def test_work_under_the_limits_passes() -> None:
    check_work(WorkEstimate("small", MEMORY_LIMIT_BYTES / 2, TIME_LIMIT_S / 2))
