"""AWS: IMDSv2 ``spot/instance-action`` (the 2-minute notice) and the rebalance recommendation.

Endpoint: ``$AWS_EC2_METADATA_SERVICE_ENDPOINT`` (the variable botocore honours) or
``http://169.254.169.254``. A session token is fetched with ``PUT /latest/api/token`` and a TTL
header, reused until shortly before it expires, and refetched at once on a 401.
"""

from __future__ import annotations

import os
import time

from fleet.agent import http
from fleet.agent.notice import Notice, PollingWatcher, TransientError, notice_deadline, parse_iso8601

DEFAULT_URL = "http://169.254.169.254"
TOKEN_TTL = 21600
#: AWS's own minimum: the instance-action notice comes two minutes ahead.
NOTICE_WINDOW = 120.0


def default_url() -> str:
    return os.environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT") or DEFAULT_URL


class AwsWatcher(PollingWatcher):
    """Polls instance-action every ``interval`` s; reports a rebalance recommendation once."""

    cloud = "aws"

    def __init__(self, url: str | None = None, *, interval: float = 1.0, rebalance: bool = True, timeout: float = 2.0):
        super().__init__(interval)
        self.url = (url or default_url()).rstrip("/")
        self.rebalance = rebalance
        self.timeout = timeout
        self._token: str | None = None
        self._token_expiry = 0.0
        self._rebalance_seen: str | None = None
        self.token_fetches = 0

    def token(self) -> str:
        """A valid session token, fetched when missing or within a minute of expiring."""
        if self._token and time.monotonic() < self._token_expiry - 60:
            return self._token
        resp = http.expect(
            http.request(
                "PUT",
                f"{self.url}/latest/api/token",
                timeout=self.timeout,
                headers={"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL)},
            ),
            "IMDS token",
        )
        if resp.status != 200 or not resp.body:
            raise TransientError(f"IMDS token: HTTP {resp.status}")
        self._token, self._token_expiry = resp.text.strip(), time.monotonic() + TOKEN_TTL
        self.token_fetches += 1
        return self._token

    def _get(self, path: str) -> http.Response:
        resp = http.expect(
            http.request(
                "GET",
                f"{self.url}/latest/meta-data/{path}",
                timeout=self.timeout,
                headers={"X-aws-ec2-metadata-token": self.token()},
            ),
            path,
        )
        if resp.status == 401:
            self._token = None
            raise TransientError(f"{path}: token refused (401), fetching a new one", retry_after=0.0)
        return resp

    def instance_id(self) -> str:
        """This instance's id (``meta-data/instance-id``); TransientError when IMDS does not say."""
        resp = self._get("instance-id")
        if resp.status != 200 or not resp.text.strip():
            raise TransientError(f"instance-id: HTTP {resp.status}")
        return resp.text.strip()

    def poll_once(self) -> Notice | None:
        resp = self._get("spot/instance-action")
        if resp.status == 200:
            doc = resp.json_object()
            deadline, detail = notice_deadline(doc.get("time"), parse_iso8601, NOTICE_WINDOW, doc)
            return Notice(kind=str(doc.get("action", "terminate")), cloud=self.cloud, deadline=deadline, detail=detail)
        if resp.status != 404:
            raise TransientError(f"spot/instance-action: unexpected HTTP {resp.status}")
        if not self.rebalance:
            return None
        resp = self._get("events/recommendations/rebalance")
        if resp.status != 200:
            return None
        doc = resp.json_object()
        seen = str(doc.get("noticeTime", ""))
        if seen == self._rebalance_seen:
            return None
        self._rebalance_seen = seen
        # A recommendation comes before any 2-minute notice: at least that long remains.
        return Notice(
            kind="rebalance",
            cloud=self.cloud,
            deadline=time.time() + NOTICE_WINDOW,
            detail={**doc, "deadline_assumed": True},
        )
