"""Time per output chunk: the histogram buckets of the gaps between consecutive deltas, in integer nanoseconds
(``gen_ai.client.operation.time_per_output_chunk``). The tracker counts gaps per bucket on its hot path;
the sums are derived once per stream (``spread_sums``). Pure module.
"""

from __future__ import annotations

from itertools import compress
from operator import mul

from otelstream import names

CHUNK_BOUNDS_NS = tuple(int(b * 1e9) for b in names.TIME_PER_CHUNK_BUCKETS)
N_CHUNK_BUCKETS = len(CHUNK_BOUNDS_NS) + 1
FIRST_BOUND_NS = CHUNK_BOUNDS_NS[0]
# Bucket placement without a binary search (which costs a C call and five comparisons of Python ints): no two bounds
# share a power-of-two interval [2**(k-1), 2**k), so the number of bounds below 2**(k-1) plus at most one comparison
# places a gap of bit length k (tests/adapters/test_flat_path.py checks the premise and the result).
BOUNDS_BELOW_BITS = (0, *(sum(b < 1 << (k - 1) for b in CHUNK_BOUNDS_NS) for k in range(1, 65)))
BOUNDS_PADDED = (*CHUNK_BOUNDS_NS, float("inf"))
# spread_sums: per bucket, its least value in integer ns (``le`` is inclusive) and how far above that a value can be
_LEAST_NS = (0, *(b + 1 for b in CHUNK_BOUNDS_NS))
_ROOM_NS = tuple(b - least for b, least in zip(CHUNK_BOUNDS_NS, _LEAST_NS, strict=False))
_BUCKET_INDEXES = range(N_CHUNK_BUCKETS)
_OVERFLOW = N_CHUNK_BUCKETS - 1


def spread_sums(counts: list[int], total: int) -> tuple[int, ...]:
    """Per-bucket sums (ns) for per-bucket counts whose overall sum is ``total``: each bucket's mean stays inside
    the bucket, so recording the mean ``count`` times keeps the count, the sum and the bucket placement exact.
    The hot path keeps only counts; the total of the gaps between consecutive deltas is last - first delta.

    Each bucket starts at its least value per count, then the rest of ``total`` fills the non-empty buckets from the
    first up to their bounds (the overflow bucket takes whatever is left). Loops run in C where they can: this runs
    once per stream on the caller's thread."""
    sums = list(map(mul, counts, _LEAST_NS))
    residual = total - sum(sums)
    if residual > 0:
        for i in compress(_BUCKET_INDEXES, counts):  # the non-empty buckets, in order
            add = residual if i == _OVERFLOW else min(counts[i] * _ROOM_NS[i], residual)
            sums[i] += add
            residual -= add
            if residual <= 0:
                break
    return tuple(sums)

