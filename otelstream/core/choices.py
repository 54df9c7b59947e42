"""Chat and legacy-completions choices: which indices a stream carried (bounded), which finished and why, and whether
every expected one did (the answer's end when ``[DONE]`` does not come). ``StreamState`` has them as a base
class. Pure module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from otelstream import names
from otelstream.core.outcome_rank import RANK_FAILED

if TYPE_CHECKING:
    from otelstream.core.side_objects import Rare


MAX_CHOICES = 128


class Choices:
    """``StreamState``'s choice bookkeeping (a base class of it: the state declares the fields)."""

    if TYPE_CHECKING:  # the fields and methods of StreamState these read and write (its slots)
        expected_choices: int | None
        last_choice: object
        rank: int
        terminal: bool
        _rare: Rare | None

        def rare(self) -> Rare: ...
        def anomaly(self, kind: str, detail: str = "") -> None: ...
    else:
        __slots__ = ()  # no fields of its own: an instance dict would cost every open stream

    def add_finish_reason(self, reason: object) -> None:
        if isinstance(reason, str):
            found = self.rare().finish_reasons
            if len(found) < MAX_CHOICES:
                found.append(reason[: names.MAX_REASON_LEN])

    def choice_seen(self, index: object) -> int | None:
        """Track a chat/completions choice index (bounded); returns it, or None when unusable. Most streams have one
        choice: a set of the indices is made only when a second one appears."""
        if type(index) is not int or index < 0:
            if index is not None:
                self.anomaly(names.ANOM_BAD_FIELD, "choice index")
            return None if index is not None else 0
        if index == self.last_choice:
            return index
        r = self._rare
        seen = r.choices_seen if r is not None else None
        if seen is None:
            if self.last_choice is None:
                self.last_choice = index
                return index
            seen = self.rare().choices_seen = {self.last_choice}  # type: ignore[arg-type]
        if index not in seen:
            if len(seen) >= MAX_CHOICES:
                self.anomaly(names.ANOM_BAD_FIELD, "too many choices")
                return None
            seen.add(index)
            if self.terminal and self.expected_choices is None and self.rank < RANK_FAILED:
                # "every choice finished" was judged on the choices seen so far (offline, or n not in the request):
                # a new one means the answer was not over
                self.terminal = False
                self.rare().t_terminal = 0
        self.last_choice = index
        return index

    def choice_finished(self, index: int, reason: str) -> bool:
        """Record a choice's finish; returns True when every expected choice has finished."""
        r = self.rare()
        finished = r._choices_finished
        if finished is None:
            finished = r._choices_finished = {}
        if index in finished:
            # a repeated finish (OpenRouter repeats it on its usage chunk) loses nothing: the first one counts, and new
            # output after it is flagged by the protocol module
            return False
        finished[index] = reason
        self.add_finish_reason(reason)
        return self.all_choices_finished()

    def all_choices_finished(self) -> bool:
        r = self._rare
        finished = r._choices_finished if r is not None else None
        if not finished:
            return False
        n = self.expected_choices
        if n is not None and n > 0:
            return len(finished) >= n
        seen = r.choices_seen  # type: ignore[union-attr]
        return len(finished) >= (len(seen) if seen is not None else 1)
