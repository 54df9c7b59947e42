"""A tiny package whose accelerator is optional: the compiled module when it was built, else the pure one."""

try:
    from tinyacc._speed import count_pairs

    ACCELERATED = True
except ImportError:
    from tinyacc._pure import count_pairs

    ACCELERATED = False

__all__ = ["ACCELERATED", "count_pairs"]
