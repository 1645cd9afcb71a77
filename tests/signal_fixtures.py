"""For tests that interrupt a subprocess with SIGINT (Ctrl-C).

A shell that starts the test run in the background (``cmd &``, ``nohup``) ignores SIGINT, its
children inherit the ignore and Python keeps an inherited ignore: such a child never gets its
KeyboardInterrupt and the test would hang or fail for a reason that is not the code's. Passing
:func:`sigint_as_ctrl_c` as ``preexec_fn`` gives the child the default disposition, as a
terminal would.
"""

from __future__ import annotations

import signal


def sigint_as_ctrl_c() -> None:
    """``preexec_fn`` of a subprocess the test will interrupt: SIGINT back to its default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
