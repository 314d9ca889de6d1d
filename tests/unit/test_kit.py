"""The adapter kit's shared pieces: the retry engine, the error table, the idempotent-launch helper
and the registration records (``providers/kit``). Pure: an injected clock and sleep, no network."""

from __future__ import annotations

import random
import threading

import pytest

from fleet.errors import (
    AuthError,
    InstanceNotFoundError,
    MalformedResponseError,
    NoCapacityError,
    ProviderError,
    QuotaExceededError,
    RateLimitedError,
    TransientProviderError,
    error_kind,
)
from fleet.model import Instance, InstanceState, LaunchRequest, Market, Offer, PoolKey
from fleet.spec import ProviderSettings
from providers.kit.errors import ErrorTable, retry_after_seconds
from providers.kit.launch import Created, Shortfall, TokenLaunches
from providers.kit.record import ProviderRecord, on_call
from providers.kit.retry import Decision, Retrier, RetryRules


class Clock:
    def __init__(self):
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def failing(errors: list[ProviderError], result: str = "ok"):
    calls = []

    def fn():
        calls.append(1)
        if errors:
            raise errors.pop(0)
        return result

    return fn, calls


def retrier(rules: RetryRules, clock: Clock) -> Retrier:
    return Retrier(rules, sleep=clock.sleep, clock=lambda: clock.now, rng=random.Random(7))


# ---- retry engine ----------------------------------------------------------------------------


def test_throttling_is_retried_with_full_jitter_below_an_exponential_cap():
    clock = Clock()
    fn, calls = failing([RateLimitedError("x", "slow down", code="Throttling")] * 4)
    assert retrier(RetryRules(base_delay=1, max_delay=4), clock).call(fn, idempotent=False) == "ok"
    assert len(calls) == 5
    assert all(0 <= s <= cap for s, cap in zip(clock.slept, [1, 2, 4, 4]))


def test_retry_after_is_obeyed_up_to_its_cap():
    clock = Clock()
    fn, _ = failing([RateLimitedError("x", "wait", retry_after=3.0), RateLimitedError("x", "wait", retry_after=99.0)])
    retrier(RetryRules(max_retry_after=10), clock).call(fn, idempotent=True)
    assert clock.slept == [3.0, 10.0]


def test_a_transient_failure_is_retried_only_when_the_call_is_idempotent():
    clock = Clock()
    fn, calls = failing([TransientProviderError("x", "502")])
    assert retrier(RetryRules(), clock).call(fn, idempotent=True) == "ok" and len(calls) == 2
    fn, calls = failing([TransientProviderError("x", "502")])
    with pytest.raises(TransientProviderError):
        retrier(RetryRules(), clock).call(fn, idempotent=False)
    assert len(calls) == 1


def test_rules_by_code_come_before_rules_by_class():
    rules = RetryRules(throttling={"SlowDown"}, never={"search_quota_exceeded"}, idempotent_only={"Conflict"})
    assert rules.decide(ProviderError("x", "m", code="SlowDown")) is Decision.RETRY
    assert rules.decide(RateLimitedError("x", "m", code="search_quota_exceeded")) is Decision.RAISE
    assert rules.decide(ProviderError("x", "m", code="Conflict")) is Decision.RETRY_IF_IDEMPOTENT
    assert rules.decide(NoCapacityError("x", "m")) is Decision.RAISE
    assert rules.decide(MalformedResponseError("x", "list")) is Decision.RAISE


def test_attempts_and_total_time_are_capped():
    clock = Clock()
    fn, calls = failing([RateLimitedError("x", "m")] * 10)
    with pytest.raises(RateLimitedError):
        retrier(RetryRules(max_attempts=3), clock).call(fn, idempotent=True)
    assert len(calls) == 3
    clock = Clock()
    fn, calls = failing([RateLimitedError("x", "m", retry_after=20.0)] * 10)
    with pytest.raises(RateLimitedError):
        retrier(RetryRules(max_attempts=10, max_total_seconds=50), clock).call(fn, idempotent=True)
    assert sum(clock.slept) <= 50 and len(calls) == 3


def test_explicit_delays_set_the_attempts():
    rules = RetryRules(delays=(0.1, 0.2))
    assert rules.attempts == 3 and rules.cap(0) == 0.1 and rules.cap(5) == 0.2
    assert RetryRules().with_delays((0.0,)).attempts == 2


# ---- error table -------------------------------------------------------------------------------

TABLE = ErrorTable(
    "acme", codes={"no_room": NoCapacityError, "broke": QuotaExceededError}, statuses={410: NoCapacityError}
)


@pytest.mark.parametrize(
    "code, status, cls",
    [
        ("no_room", 400, NoCapacityError),
        ("broke", 402, QuotaExceededError),
        ("", 410, NoCapacityError),
        ("", 401, AuthError),
        ("", 404, InstanceNotFoundError),
        ("", 429, RateLimitedError),
        ("", 599, TransientProviderError),
        ("", 400, ProviderError),
        ("unknown", None, ProviderError),
    ],
)
def test_the_code_decides_then_the_status(code, status, cls):
    err = TABLE.error("why", code=code, status=status, region="r1")
    assert type(err) is cls and err.provider == "acme" and err.region == "r1"
    assert err.code == (code or f"HTTP{status}")


def test_an_error_carries_the_retry_after_and_a_bounded_message():
    err = TABLE.error("x" * 1000, status=429, retry_after=retry_after_seconds("7"))
    assert err.retry_after == 7.0 and len(err.message) == 400
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") is None and retry_after_seconds(None) is None


def test_error_kinds_live_beside_the_classes():
    assert error_kind(NoCapacityError("x", "m")) == "capacity"
    assert error_kind(MalformedResponseError("x", "list")) == "malformed"
    assert error_kind(ProviderError("x", "m")) == "error"


# ---- idempotent launch ---------------------------------------------------------------------------

POOL = PoolKey(provider="acme", region="r1", zone="", instance_type="gpu.1", market=Market.ON_DEMAND)
OFFER = Offer(pool=POOL, accelerator="H100", gpus=1, price_per_hour=2.0)


class World:
    """What the vendor holds: instances by token; ``room`` limits how many more can be made."""

    def __init__(self, room: int = 100):
        self.room = room
        self.held: dict[str, list[Instance]] = {}
        self.creates = 0

    def find(self, token: str) -> list[Instance]:
        return [i for i in self.held.get(token, []) if i.state is not InstanceState.TERMINATED]

    def create(self, token: str, n: int, fail: ProviderError | None = None) -> Created:
        self.creates += 1
        if fail is not None:
            raise fail
        made = []
        for _ in range(min(n, self.room)):
            self.room -= 1
            made.append(
                Instance(
                    id=f"i-{sum(map(len, self.held.values()))}",
                    fleet="f",
                    pool=POOL,
                    state=InstanceState.PENDING,
                    accelerator="H100",
                    gpus=1,
                    price_per_hour=2.0,
                    launched_at=0.0,
                )
            )
            self.held.setdefault(token, []).append(made[-1])
        return Created(made, None if len(made) == n else Shortfall("capacity", "no_room", "full"))


def request(count: int, token: str = "t1") -> LaunchRequest:
    return LaunchRequest(fleet="f", offer=OFFER, count=count, token=token)


def launches() -> TokenLaunches:
    return TokenLaunches("acme", clock=lambda: 100.0)


def test_found_instances_count_and_only_the_rest_is_created():
    world, kit = World(), launches()
    world.create("t1", 2)  # a crashed run made two
    result = kit.launch(
        request(5), fingerprint="p", find=lambda: world.find("t1"), create=lambda n: world.create("t1", n)
    )
    assert len(result.instances) == 5 and len(world.held["t1"]) == 5 and not result.error_kind


def test_a_replay_returns_the_same_instances_and_marks_the_gone_ones():
    world, kit = World(), launches()
    first = kit.launch(
        request(2), fingerprint="p", find=lambda: world.find("t1"), create=lambda n: world.create("t1", n)
    )
    world.held["t1"][0] = world.held["t1"][0].model_copy(update={"state": InstanceState.TERMINATED})
    again = kit.launch(
        request(2), fingerprint="p", find=lambda: world.find("t1"), create=lambda n: world.create("t1", n)
    )
    assert [i.id for i in again.instances] == [i.id for i in first.instances] and world.creates == 1
    assert again.instances[0].state is InstanceState.TERMINATED and again.instances[0].ended_at == 100.0
    with pytest.raises(ProviderError, match="different parameters"):
        kit.launch(request(2), fingerprint="other", find=lambda: [], create=lambda n: Created())


def test_a_shortfall_is_reported_and_an_error_after_progress_becomes_one():
    world, kit = World(room=3), launches()
    short = kit.launch(
        request(5), fingerprint="p", find=lambda: world.find("t1"), create=lambda n: world.create("t1", n)
    )
    assert len(short.instances) == 3 and short.error_kind == "capacity"
    made: list[int] = []

    def create(n: int) -> Created:
        if made:
            raise QuotaExceededError("acme", "over quota", code="broke")
        made.append(1)
        return World().create("t2", 1)

    partial = kit.launch(request(4, "t2"), fingerprint="p", find=lambda: [], create=create)
    assert len(partial.instances) == 1 and (partial.error_kind, partial.error_code) == ("quota", "broke")
    with pytest.raises(AuthError):
        kit.launch(
            request(1, "t3"),
            fingerprint="p",
            find=lambda: [],
            create=lambda n: World().create("t3", n, AuthError("acme", "bad key")),
        )


def test_one_token_never_creates_twice_from_two_threads():
    world, kit = World(), launches()
    gate = threading.Barrier(4)

    def go():
        gate.wait()
        kit.launch(request(3), fingerprint="p", find=lambda: world.find("t1"), create=lambda n: world.create("t1", n))

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(world.held["t1"]) == 3


# ---- registration records -----------------------------------------------------------------------


def test_a_record_refuses_what_cannot_work():
    with pytest.raises(TypeError, match="settings"):
        ProviderRecord("acme", settings=dict)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="extra"):
        ProviderRecord("acme", factory=lambda spec, settings: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="not both"):
        ProviderRecord("acme", pulumi_stack="stacks.acme:Acme", pulumi_refusal="no")
    assert ProviderRecord("acme").settings is ProviderSettings and not ProviderRecord("acme").has_adapter


def test_on_call_imports_its_target_only_when_called():
    dumps = on_call("json:dumps")
    assert dumps({"a": 1}) == '{"a": 1}' and dumps.__name__ == "dumps"
    with pytest.raises(ValueError, match="package.module:function"):
        on_call("json.dumps")
