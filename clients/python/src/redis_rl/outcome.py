"""The outcome of a call, for policies that count only failures or only
successes (``Policy(counts=...)``): the adapters' rule, the same in every
client — an exception, or an answer with a status of 400 or more, is a
failure (express-rate-limit's ``requestWasSuccessful``); anything else a
success; unless the code said so itself (``permit.failed()`` /
``permit.succeeded()``)."""

from __future__ import annotations

from typing import Any


def is_failure(status: int | None) -> bool:
    """``status`` None: the call raised."""
    return status is None or status >= 400


def note_outcome(permit: Any, status: int | None) -> None:
    """Marks ``permit`` by ``status`` unless the code already marked it."""
    if permit is None or getattr(permit, "_succeeded", True) is not None:
        return
    if is_failure(status):
        permit.failed()
    else:
        permit.succeeded()
