"""Running the doctor's Bedrock cells (``bedrock_cells``): ConverseStream, and an Anthropic model's invoke stream
(``messages`` through Bedrock), on one boto3 client (sync) and one aiobotocore client (async), each cell's answer
served in-process by the cell current where the call is made."""

from __future__ import annotations

import asyncio
from typing import Any, Final

from otelstream.doctor import bedrock_cells, private_loop
from otelstream.doctor import faults as F
from otelstream.doctor.routing import CELL, Routing

_ASYNC_CELL_TIMEOUT_S: Final = 5.0  # a cell that hangs (a cancellation swallowed) is a mismatch, not a hung doctor


def _sync(state: Any, mode_cells: list[Any], routing: Routing) -> None:
    import boto3

    client = boto3.client(**bedrock_cells.client_kwargs())
    bedrock_cells.serve(client, state.bedrock, is_async=False)
    for cell in mode_cells:
        if state.stopped or not routing.intact:
            return
        token = CELL.set(cell.key)
        try:
            bedrock_cells.run_sync(client, cell.fault.caller, cell.via)
        except Exception as exc:  # the doctor's own harness failing: a mismatch with the reason, no crash
            state.problems[cell.key] = f"could not run: {exc!r}"
        finally:
            CELL.reset(token)


async def _async(state: Any, mode_cells: list[Any], routing: Routing) -> None:
    from aiobotocore.session import get_session

    async with get_session().create_client(**bedrock_cells.client_kwargs()) as client:
        bedrock_cells.serve(client, state.bedrock, is_async=True)
        for cell in mode_cells:
            if state.stopped or not routing.intact:
                return
            token = CELL.set(cell.key)
            try:
                run = bedrock_cells.run_async(client, cell.fault.caller, cell.via)
                await asyncio.wait_for(run, _ASYNC_CELL_TIMEOUT_S)
            except asyncio.TimeoutError:
                state.problems[cell.key] = f"hung: no end within {_ASYNC_CELL_TIMEOUT_S:g} s"
            except Exception as exc:
                state.problems[cell.key] = f"could not run: {exc!r}"
            finally:
                CELL.reset(token)


def run_cells(state: Any, cells: list[Any], routing: Routing) -> None:
    """Run ``cells`` (the run's Bedrock ones), sync first; ``state`` is the runner's run (its plans, problems, stop)."""
    for mode in F.MODES:
        mode_cells = [c for c in cells if c.mode == mode]
        if mode_cells:
            if mode == F.SYNC:
                _sync(state, mode_cells, routing)
            else:
                private_loop.run_loop(_async(state, mode_cells, routing))
