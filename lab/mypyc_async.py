# The async observer for mypyc, which does not compile async generators ("async generators are unimplemented"): the
# same work as pure.observe_async, as a class whose __anext__ is a native coroutine. build.sh splices it into
# mypure.py in place of the async generator; it is never imported on its own.


class observe_async:  # noqa: N801 (stands in for the function of the same name)
    def __init__(self, agen: AsyncIterator[Any], a: Acct, on_end: OnEnd, whoami: Callable[[], object]) -> None:
        self.agen = agen
        self.a = a
        self.on_end = on_end
        self.whoami = whoami
        self.state = 0

    def __aiter__(self) -> observe_async:
        return self

    async def __anext__(self) -> Any:
        a = self.a
        if self.state == 2:
            raise StopAsyncIteration
        self.state = 1
        try:
            a.pulling = self.whoami()
            a.t_pull = a.clock()
            item = await self.agen.__anext__()
            a.pulling = None
            account(a, item, a.clock())
            return item
        except StopAsyncIteration:
            self.state = 2
            self.on_end(a, None)
            raise
        except BaseException as exc:
            self.state = 2
            self.on_end(a, exc)
            raise
