"""The streams no SDK adapter sees, observed at the ``httpx`` / ``httpx2`` client (``streams``), with the body wrapper
(``body``) and the SSE reading of its bytes (``decoding``)."""
