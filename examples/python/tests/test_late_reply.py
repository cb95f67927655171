"""SERVICES.md "A late reply changes nothing", for every app these tests run
(EXAMPLE_APP: the FastAPI app and the Django one): an endpoint answered 503
while Redis was paused leaves its counter as if the request never came, once
Redis has run the command. Endpoint 3's per-user API is the case: the Django
app once decided it through the sync client, whose lost reply counted."""

from __future__ import annotations

import signal
import time

from conftest import App, Server


def remaining(response) -> int:
    return int(response.headers["ratelimit"].split(";r=")[1].split(";")[0])


def test_late_reply_on_per_user_api_changes_nothing():
    with Server() as s:
        app = App(redis_url=f"redis://127.0.0.1:{s.port}", prefix="late:")
        try:
            first = app.http.get("/seed002/api/user/u7")
            assert (first.status_code, remaining(first)) == (200, 2)
            s.proc.send_signal(signal.SIGSTOP)
            try:
                slack = app.overhead()  # 1 s plus what the machine adds to any answer now (conftest)
                t0 = time.monotonic()
                late = app.http.get("/seed002/api/user/u7")
                assert time.monotonic() - t0 < 1.0 + slack
            finally:
                s.proc.send_signal(signal.SIGCONT)
            assert late.status_code == 503
            time.sleep(2.0)  # Redis runs the late decision; the app gives it back
            second = app.http.get("/seed002/api/user/u7")
            assert second.status_code == 200
            assert remaining(second) == 1, "the late request was counted"
        finally:
            app.stop()
