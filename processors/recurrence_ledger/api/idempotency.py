"""Idempotent review decisions (``Idempotency-Key``, docs/results.md): a
decision request sent again with the same key — a double click, a retry
after a lost answer — gets the first request's answer and publishes
nothing.

The answer of each key lives in Redis (``Keys.decision_request``, the
namespace's slot) for :data:`IDEMPOTENCY_TTL_S` seconds. The first request
claims the key with ``SET … NX EX`` — atomic, so of two concurrent requests
with one key exactly one goes on to publish — and stores its answer there
once it has one; the others wait for that answer (at most
:data:`WAIT_S` seconds, then 409) and answer it, marked
``Idempotent-Replayed: true``. A key names one request: the same key with
another candidate or body is a 400. An answer of 5xx (Kafka or Redis down:
nothing was published) is not kept, so a retry tries again.

The claim itself expires after :data:`CLAIM_S` seconds, longer than a
request takes to be answered (the publish gives up after
``DECISION_TIMEOUT_S``), far shorter than an answer is kept: a request
that claimed the key and then could not store its answer (Redis failed
between the publish and the store, or the process died) leaves a claim
that retries meet with 409 for at most :data:`CLAIM_S` seconds, never for
the answer's :data:`IDEMPOTENCY_TTL_S`; the first request still gives its
own answer (:meth:`DecisionAnswers.finish` returns False). After that a
retry is a new request: the view then shows the candidate decided, so it is
answered 409 ``already_decided`` (or, if the view is still behind, the
worker dead-letters the second decision as ``already_decided``).

The key is the reviewer's: it is stored under the digest of the reviewer's
name and the key, so one reviewer's key never answers another's request.
"""

from __future__ import annotations

import logging
import re
import time

import orjson
import redis

from recurrence_ledger.kafka.review import DECISION_TIMEOUT_S
from recurrence_ledger.ledger.normalize import digest
from recurrence_ledger.read.keys import Keys

#: Seconds an answer stays with its key: a retry within them is answered, never published again.
IDEMPOTENCY_TTL_S = 600
#: Seconds a request waits for the answer of another request with its key before a 409.
WAIT_S = 45.0
#: Seconds a claim without an answer holds its key: longer than the publish
#: may take (DECISION_TIMEOUT_S) and than the others wait (WAIT_S), so a
#: request still being answered is never claimed twice.
CLAIM_S = int(max(DECISION_TIMEOUT_S, WAIT_S)) + 15
#: What an Idempotency-Key may be: 1–128 visible ASCII characters (a UUID, say).
KEY_FORMAT = re.compile(r"[\x21-\x7e]{1,128}")
#: The answer's header on a replayed answer.
REPLAYED_HEADER = "Idempotent-Replayed"

logger = logging.getLogger(__name__)


class DecisionAnswers:
    """The answers of idempotent decision requests, on ``client`` under
    ``keys``' namespace (module docstring)."""

    def __init__(self, client: redis.Redis, keys: Keys, ttl_s: int = IDEMPOTENCY_TTL_S, wait_s: float = WAIT_S,
                 claim_s: int = CLAIM_S):
        self.client = client
        self.keys = keys
        self.ttl_s = ttl_s
        self.wait_s = wait_s
        self.claim_s = claim_s

    def name(self, reviewer: str, key: str) -> str:
        """The Redis key of ``reviewer``'s ``key``."""
        return self.keys.decision_request(digest({"reviewer": reviewer, "idempotency_key": key}).removeprefix("sha256:"))

    def begin(self, name: str, request: str) -> tuple[int, dict, bool] | None:
        """Claim ``name`` for the request whose fingerprint is ``request``:
        None when this request claimed it (it goes on, then calls
        :meth:`finish`; the claim expires after :attr:`claim_s` seconds
        without it); else the answer ``(status, body, replayed)`` to give —
        the first request's (``replayed`` True: it goes with
        :data:`REPLAYED_HEADER`), a 400 when that one was another request,
        a 409 when it has no answer after :attr:`wait_s` seconds (these two
        are this request's own answers: ``replayed`` False). Raises
        redis.RedisError."""
        claim = orjson.dumps({"request": request, "status": None})
        deadline = time.monotonic() + self.wait_s
        while True:
            if self.client.set(name, claim, nx=True, ex=self.claim_s):
                return None
            stored = self.client.get(name)
            if stored is not None:
                first = orjson.loads(stored)
                if first["request"] != request:
                    return 400, {"detail": "this Idempotency-Key was sent with another request: a key names one decision request"}, False
                if first["status"] is not None:
                    return first["status"], first["body"], True
            if time.monotonic() > deadline:
                return 409, {"detail": "a request with this Idempotency-Key is still being answered: try again"}, False
            time.sleep(0.05)

    def finish(self, name: str, request: str, status: int, body: dict) -> bool:
        """Keep the answer of the request that claimed ``name`` for
        :attr:`ttl_s` seconds (a 5xx is dropped instead, so a retry tries
        again). False when Redis failed (the claim then expires after
        :attr:`claim_s` seconds: module docstring); the answer is still the
        request's to give."""
        try:
            if status >= 500:
                self.client.delete(name)
            else:
                self.client.set(name, orjson.dumps({"request": request, "status": status, "body": body}), ex=self.ttl_s)
        except redis.RedisError as error:
            logger.warning("the answer of decision request %s was not kept (%s): its claim expires in %d s", name, error, self.claim_s)
            return False
        return True

    def abandon(self, name: str) -> None:
        """Drop the claim of a request that ended without an answer; when
        Redis fails too, the claim expires after :attr:`claim_s` seconds
        (never raises redis.RedisError, so the request's own error is the
        one raised)."""
        try:
            self.client.delete(name)
        except redis.RedisError as error:
            logger.warning("the claim of decision request %s was not dropped (%s): it expires in %d s", name, error, self.claim_s)
