"""The Bedrock adapter's patch points (file:line refs are botocore 1.43.117 / aiobotocore 3.10.0):

- ``botocore.client.BaseClient._make_api_call`` (``client.py:999``) and ``aiobotocore.client.AioBaseClient
  ._make_api_call`` (``client.py:354``, an override that does not call botocore's): the call (``api_call``).
- ``botocore.eventstream.EventStream.__iter__`` (``eventstream.py:590``) and ``aiobotocore.eventstream.AioEventStream
  .__anext__`` (``eventstream.py:16``, the async generator ``__aiter__`` returns): the caller's pulls (``pulls``).
- ``EventStream.close`` (``eventstream.py:620``, inherited by ``AioEventStream``): the caller's close, reported at once
  (a close asked while a pull runs waits for how that pull ends).
"""

from __future__ import annotations

from otelstream import names
from otelstream.adapters import _patch
from otelstream.adapters._patch import LIFECYCLE_MEASURES, Patch
from otelstream.adapters.bedrock import api_call, pulls

_SYNC, _ASYNC = (_patch.BEDROCK,), (_patch.BEDROCK_ASYNC,)

PATCHES = (
    Patch("botocore.client", "BaseClient._make_api_call", api_call.api_call_sync, measures=LIFECYCLE_MEASURES,
          scopes=_SYNC),
    Patch("aiobotocore.client", "AioBaseClient._make_api_call", api_call.api_call_async,
          measures=LIFECYCLE_MEASURES, scopes=_ASYNC),
    Patch("botocore.eventstream", "EventStream.__iter__", pulls.iter_sync, measures=LIFECYCLE_MEASURES,
          scopes=_SYNC),
    Patch("aiobotocore.eventstream", "AioEventStream.__anext__", pulls.iter_async, measures=LIFECYCLE_MEASURES,
          scopes=_ASYNC),
    Patch("botocore.eventstream", "EventStream.close", pulls.close, measures=(names.MEASURE_CALLER_CLOSE,),
          scopes=(*_SYNC, *_ASYNC)),
)  # fmt: skip
