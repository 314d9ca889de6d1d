"""The AWS error table routes the codes the issue names to the classes the executor acts on."""

from __future__ import annotations

import pytest

from fleet.errors import AuthError, NoCapacityError, ProviderError, QuotaExceededError, RateLimitedError

pytest.importorskip("boto3")

from providers.aws.errors import error_class, to_error  # noqa: E402


@pytest.mark.parametrize(
    "code, cls",
    [
        ("InsufficientInstanceCapacity", NoCapacityError),
        ("UnfulfillableCapacity", NoCapacityError),
        ("SpotMaxPriceTooLow", NoCapacityError),
        ("MaxSpotInstanceCountExceeded", QuotaExceededError),
        ("VcpuLimitExceeded", QuotaExceededError),
        ("RequestLimitExceeded", RateLimitedError),
        ("UnauthorizedOperation", AuthError),
        ("SomethingNew", ProviderError),
    ],
)
def test_codes_map_to_classes(code, cls):
    assert error_class(code) is cls
    err = to_error(code, "why", region="us-east-1")
    assert (
        type(err) is cls and err.code == code and err.provider == "aws" and str(err) == f"aws/us-east-1: why [{code}]"
    )
