"""The one "close when the with-block ends" behaviour shared by the log's handles, the offset
stores and the live progress line."""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

__all__ = ["Closing"]

_Self = TypeVar("_Self", bound="Closing")


class Closing:
    """A handle usable in ``with``: the block's end calls :meth:`close`, error or not (a
    handle that ends otherwise after an error overrides :meth:`_end`)."""

    __slots__ = ()

    def close(self) -> None:
        raise NotImplementedError

    def _end(self, failed: bool) -> None:
        """End the with-block; ``failed`` when it raised."""
        self.close()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._end(exc_type is not None)
