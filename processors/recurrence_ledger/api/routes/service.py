"""The service's own routes: ``GET /healthz`` (whether Redis answers; no
API token needed, and with one set, why Redis is down is only told to a
request that carries it), ``GET /field-catalogue`` (the published records'
fields with their titles and descriptions, and the unknown reasons of
contract §17, from ``recurrence_ledger.ledger.records``) and ``GET /`` (the dashboard page, with
:data:`recurrence_ledger.api.responses.PAGE_HEADERS`; its query parameters
are read by the page's script)."""

from __future__ import annotations

from typing import Annotated

import redis
from fastapi import FastAPI, Query, Request
from fastapi.responses import FileResponse, JSONResponse

from recurrence_ledger.api.auth import BearerToken
from recurrence_ledger.api.responses import ERRORS, page
from recurrence_ledger.api.schemas import FieldCatalogue, Health
from recurrence_ledger.ledger.fields import field_catalogue
from recurrence_ledger.ledger.holdout_records import Effect, EffectCounts
from recurrence_ledger.ledger.records import RevisionFigures, ScopeStatistics, SignaturePattern, UnknownReasons
from recurrence_ledger.read.connect import describe_error
from recurrence_ledger.read.reader import ViewReader


def register(app: FastAPI, reader: ViewReader, redis_url: str, token: BearerToken | None) -> None:
    """Add ``/healthz`` (PING through ``reader``; ``redis_url`` names Redis
    in the detail of an outage, ``token`` decides who is told it) and the
    dashboard page to ``app``."""

    @app.get(
        "/healthz", response_model=Health, responses={400: ERRORS[400], 503: {"model": Health, "description": "Redis does not answer"}}, tags=["service"]
    )
    async def healthz(request: Request) -> JSONResponse:
        """200 when Redis answers PING, else 503. It needs no API token; with
        one set, why Redis is down (``detail``) is only told to a request
        that carries the token."""
        try:
            reader.ping()
        except redis.RedisError as error:
            told = token is None or token.accepts(request.scope["headers"])
            detail = describe_error(error, redis_url) if told else None
            body = Health(status="unavailable", redis="down", namespace=reader.namespace, detail=detail)
            return JSONResponse(body.model_dump(), status_code=503)
        return JSONResponse(Health(status="ok", redis="up", namespace=reader.namespace).model_dump())

    catalogue = FieldCatalogue(
        scope=field_catalogue(ScopeStatistics), revision=field_catalogue(RevisionFigures), unknown_reasons=field_catalogue(UnknownReasons),
        pattern=field_catalogue(SignaturePattern), effect=field_catalogue(Effect), effects=field_catalogue(EffectCounts),
    ).model_dump()

    @app.get("/field-catalogue", response_model=FieldCatalogue, responses={400: ERRORS[400]}, tags=["service"])
    async def field_catalogue_route() -> JSONResponse:
        """The fields of the published records as the ledger states them
        (``recurrence_ledger.ledger.records``): a ScopeStatistics record's
        (``scope``), a revision row's (``revision``) and the eleven unknown
        reasons of contract §17 in the contract's order, each with its
        family and whether it makes a binding suspect
        (``unknown_reasons``), a signature pattern's (``pattern``,
        contract §23.3), and a revision's effect (``effect``) and the effect
        verdicts (``effects``) of contract §21.4. The dashboard takes its
        labels from here."""
        return JSONResponse(catalogue)

    @app.get("/", include_in_schema=False)
    def dashboard(
        refresh: Annotated[str | None, Query(description="Milliseconds between polls (read by the page's script).")] = None,
        limit: Annotated[str | None, Query(description="Revisions the page shows (read by the page's script).")] = None,
    ) -> FileResponse:
        return page("index.html")
