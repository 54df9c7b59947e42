def count_pairs(chunk: bytes) -> int:
    return chunk.count(b"\n:")
