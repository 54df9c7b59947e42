"""The benchmark's memory verdict (``bench/report/budgets.py``): a retained figure below zero is an offset in the
measurement, never proof that the streams kept nothing."""

from __future__ import annotations

from bench.report.budgets import RETAINED_NOISE_B, retained_verdict

MET, NOT_MET = "**met**", "**not met**"


def _whole(added: int, streams: int) -> dict[str, int]:
    return {"added_retained_bytes": added, "total_streams": streams}


def _halves(whole: int, second: int, streams: int) -> dict[str, int]:
    return {**_whole(whole, streams), "added_second_half_retained_bytes": second, "second_half_streams": streams // 2}


def test_a_constant_negative_offset_proves_nothing() -> None:
    # the 2026-12-05 record: about -73 KB after 10 000 streams and after 200 alike
    verdict = retained_verdict([_whole(-73_551, 10_000), _whole(-72_780, 2_000), _whole(-73_846, 200)])
    assert verdict not in (MET, NOT_MET) and "unproven" in verdict


def test_the_second_half_decides_when_measured() -> None:
    assert retained_verdict([_halves(-73_551, -300, 10_000)]) == MET
    assert retained_verdict([_halves(-73_551, 6_000, 10_000)]) == NOT_MET  # > 1 B per stream over 5 000
    assert retained_verdict([_halves(0, -60_000, 10_000)]) == NOT_MET  # an offset there is no proof either


def test_noise_passes_and_growth_fails_either_way() -> None:
    assert retained_verdict([_whole(RETAINED_NOISE_B - 1, 200), _whole(-(RETAINED_NOISE_B - 1), 200)]) == MET
    assert retained_verdict([_whole(RETAINED_NOISE_B + 1, 200)]) == NOT_MET
    assert retained_verdict([_halves(0, 600, 400)]) == MET  # within the noise floor, not 3 B per stream kept
