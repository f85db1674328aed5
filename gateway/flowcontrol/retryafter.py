"""The Retry-After a rejected request is told (kube's droppedRequestsTracker, per priority
level): 1 second to start with, doubled (up to 32) while the level keeps rejecting at least
three requests per second of it, and brought down a second at a time once it rejects fewer
than one per second of it. Clients that honour it (client-go does) back off as TCP would."""

from __future__ import annotations

MAX_RETRY_AFTER = 32


class DroppedRequests:
    """The recent rejections of one priority level, by whole second."""

    __slots__ = ("current_count", "current_second", "history", "retry_after", "updated")

    def __init__(self) -> None:
        self.history: list[tuple[int, int]] = []  # (second, rejections), oldest first
        self.current_second = 0
        self.current_count = 0
        self.retry_after = 1
        self.updated = 0  # when retry_after last doubled

    def record(self, now: float) -> None:
        second = int(now)
        if second == self.current_second:
            self.current_count += 1
            return
        self._remember(self.current_second, self.current_count)
        self.current_second, self.current_count = second, 1
        self._adjust(second)

    def _remember(self, second: int, count: int) -> None:
        self.history.append((second, count))
        keep = min(2 * self.retry_after, MAX_RETRY_AFTER)
        self.history = [(s, c) for s, c in self.history if second - s <= keep]

    def _adjust(self, second: int) -> None:
        retry_after = self.retry_after
        dropped = sum(c for s, c in self.history if second - s <= retry_after and s < second)
        if second - self.updated >= retry_after and dropped >= 3 * retry_after:
            self.retry_after = min(retry_after * 2, MAX_RETRY_AFTER)
            self.updated = second
        elif dropped < retry_after and retry_after > 1:
            self.retry_after = retry_after - 1
