"""Every golden case of clients/conformance/ (the three clients run the same
files): what the Python client sends, decides, answers and refuses."""

from __future__ import annotations

import pytest

from conformance import load, run

CASES = load()


def test_the_golden_file_has_every_category():
    kinds = {c["file"] for c in CASES}
    assert len(CASES) >= 150 and {"argv-kinds.json", "argv-several.json", "decisions.json", "overrides.json",
                                  "refused.json", "settlement.json", "limits-text.json"} <= kinds
    assert len({c["id"] for c in CASES}) == len(CASES), "case ids are unique"


@pytest.mark.parametrize("case", CASES, ids=[f"{c['file'][:-5]}/{c['id']}" for c in CASES])
def test_case(case):
    got = run(case)
    want = case["expect"]
    if "refused" in want:
        assert "refused" in got, f"accepted: {got}"
        assert got["refused"]["field"] == want["refused"]["field"], got["refused"]["error"]
        return
    assert "refused" not in got, got["refused"]["error"]
    assert "tokens" not in got, got["tokens"]
    assert got["commands"] == want["commands"]
    if "decision" in want:
        assert got["decision"] == want["decision"]
    if "settlement" in want:
        assert got["settlement"] == want["settlement"]
