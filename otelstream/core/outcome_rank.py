"""Which outcome wins when a stream reports several (an error event after a failed response, say): error > failed >
incomplete > completed, as ranks the tracker compares in one integer step. Pure module."""

from __future__ import annotations

from otelstream import names

RANK_NONE, RANK_COMPLETED, RANK_INCOMPLETE, RANK_FAILED, RANK_ERROR = 0, 1, 2, 3, 4
OUTCOME_BY_RANK = {
    RANK_COMPLETED: names.COMPLETED,
    RANK_INCOMPLETE: names.INCOMPLETE,
    RANK_FAILED: names.FAILED,
    RANK_ERROR: names.ERROR,
}
RANK_BY_OUTCOME = {v: k for k, v in OUTCOME_BY_RANK.items()}
