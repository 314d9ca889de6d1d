"""One idempotent-launch helper: token lock, replay, find-by-token, create the rest, report.

Every adapter's ``launch`` has the same shape (``providers.base`` states the contract):

1. one lock per ``request.token``, so two threads with one token never both create;
2. a token already answered in this process is *replayed*: the same instances, those that are
   gone since marked terminated, never recreated; a token reused with other parameters (its
   ``fingerprint`` differs) is refused (``token-mismatch``);
3. otherwise what the provider already holds under the token is *found* (``find``: by the tag,
   label or client token the adapter wrote; a crash between create and report leaves these),
   and counts towards the request;
4. the rest is *created* (``create(n)`` makes up to ``n``; it may make fewer and say why in a
   :class:`Shortfall`) until the count is reached, a shortfall is reported or nothing was made;
5. the result is *reported*: a ProviderError raised after something was made becomes the
   result's shortfall (the instances are kept); raised before anything exists it propagates.

Usage (``providers/vast/provider.py``)::

    self._launches = TokenLaunches("vast", clock=self.now)
    return self._launches.launch(request, fingerprint=label, find=lambda: ..., create=lambda n: ...)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from fleet.errors import ProviderError, error_kind
from fleet.model import Instance, InstanceState, LaunchRequest, LaunchResult


@dataclass(frozen=True)
class Shortfall:
    """Why a launch made fewer than asked: ``kind`` is an error kind (``fleet.errors.ERROR_KINDS``)."""

    kind: str
    code: str = ""
    message: str = ""

    @classmethod
    def of(cls, err: ProviderError) -> Shortfall:
        return cls(error_kind(err), err.code, str(err))


@dataclass(frozen=True)
class Created:
    """What one ``create(n)`` call made, and why it made fewer than ``n`` (``None``: it did not)."""

    instances: Sequence[Instance] = ()
    shortfall: Shortfall | None = None


@dataclass
class _Answered:
    fingerprint: Hashable
    instances: list[Instance]
    shortfall: Shortfall | None


class TokenLaunches:
    """The per-process memory of launch tokens of one adapter (thread-safe)."""

    def __init__(self, provider: str, *, clock: Callable[[], float]):
        self.provider = provider
        self.clock = clock
        self._lock = threading.Lock()
        self._token_locks: dict[str, threading.Lock] = {}
        self._answered: dict[str, _Answered] = {}

    def launch(
        self,
        request: LaunchRequest,
        *,
        fingerprint: Hashable,
        find: Callable[[], Sequence[Instance]],
        create: Callable[[int], Created],
        alive: Callable[[], set[str]] | None = None,
    ) -> LaunchResult:
        """Launch ``request`` idempotently (the module doc's steps).

        ``fingerprint``: the request's parameters as the provider sees them (equal on a replay);
        ``find()``: the live instances already made under ``request.token``; ``create(n)``: make up
        to ``n`` more; ``alive()``: ids still alive on a replay (default: ``find()``'s ids).
        """
        with self._token_lock(request.token):
            seen = self._answered.get(request.token)
            if seen is not None:
                return self._replay(request, seen, fingerprint, alive or (lambda: {i.id for i in find()}))
            instances = list(find())[: request.count]
            shortfall: Shortfall | None = None
            while len(instances) < request.count:
                try:
                    made = create(request.count - len(instances))
                except ProviderError as err:
                    if not instances:
                        raise
                    shortfall = Shortfall.of(err)
                    break
                instances += list(made.instances)[: request.count - len(instances)]
                if made.shortfall is not None or not made.instances:
                    shortfall = made.shortfall
                    break
            self._answered[request.token] = _Answered(fingerprint, instances, shortfall)
        return _result(instances, shortfall)

    def busy(self) -> set[str]:
        """Tokens this process has answered or is launching (what they made may be on its way)."""
        with self._lock:
            return set(self._answered) | {t for t, lock in self._token_locks.items() if lock.locked()}

    def forget(self, token: str) -> None:
        """Drop what this process remembers of ``token`` (a later launch finds again)."""
        with self._lock:
            self._answered.pop(token, None)

    def _replay(
        self, request: LaunchRequest, seen: _Answered, fingerprint: Hashable, alive: Callable[[], set[str]]
    ) -> LaunchResult:
        if seen.fingerprint != fingerprint:
            raise ProviderError(
                self.provider,
                f"launch token {request.token!r} was already used with different parameters",
                code="token-mismatch",
            )
        living, now = alive(), self.clock()
        out = [
            i if i.id in living else i.model_copy(update={"state": InstanceState.TERMINATED, "ended_at": now})
            for i in seen.instances
        ]
        return _result(out, seen.shortfall)

    def _token_lock(self, token: str) -> threading.Lock:
        with self._lock:
            return self._token_locks.setdefault(token, threading.Lock())


def _result(instances: Sequence[Instance], shortfall: Shortfall | None) -> LaunchResult:
    s = shortfall or Shortfall("")
    return LaunchResult(instances=tuple(instances), error_kind=s.kind, error_code=s.code, error_message=s.message)
