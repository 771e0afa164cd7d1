"""Helpers the API tests share: a client that checks every answer against
the OpenAPI document (the schema of its path, method and status, with the
content type it names), and tokens made as `pgbus-web tokens add` makes them."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
from referencing import Registry, Resource

from pgbus_web.api import openapi
from pgbus_web.core import tokens

DOCUMENT = openapi.document()
_REGISTRY = Registry().with_resource(
    "urn:pgbus-api",
    Resource.from_contents(
        {"$schema": "https://json-schema.org/draft/2020-12/schema", "components": DOCUMENT["components"]}
    ),
)
BASE = "/api/v1"


def _template(path: str) -> str:
    pattern = re.escape(path)
    pattern = pattern.replace(re.escape("{workflow_id}"), ".+").replace(re.escape("{verb}"), "[^/]+")
    pattern = pattern.replace(re.escape("{operation_id}"), "[0-9]+").replace(re.escape("{key}"), "[^/]+")
    pattern = pattern.replace(re.escape("{session_id}"), "[^/]+").replace(re.escape("{name}"), "[^/]+")
    return f"^{pattern}$"


def template_of(method: str, url: str) -> str:
    """The document's operation for *method* on *url* (the most specific
    template: a run's signals route before its verbs)."""
    path = url.split("?", 1)[0]
    assert path.startswith(BASE), path
    path = path[len(BASE) :]
    candidates = [
        template
        for template, item in DOCUMENT["paths"].items()
        if method.lower() in item and re.match(_template(template), path)
    ]
    assert candidates, f"{method} {path} is not in the OpenAPI document"
    candidates.sort(key=lambda template: template.count("{"))
    return candidates[0]


def operation_of(method: str, url: str) -> dict[str, Any]:
    return DOCUMENT["paths"][template_of(method, url)][method.lower()]


def check_answer(method: str, url: str, response) -> Any:
    """The answer's JSON, after checking it against the document."""
    operation = operation_of(method, url)
    answers = operation["responses"]
    assert str(response.status_code) in answers, (method, url, response.status_code, response.get_data(as_text=True))
    described = answers[str(response.status_code)]["content"]
    if len(described) > 1:
        # An export: one of its documented text formats, streamed.
        assert response.mimetype in described, (response.mimetype, list(described))
        return response.get_data(as_text=True)
    [(media, body)] = described.items()
    assert response.mimetype == media, (response.mimetype, media)
    value = json.loads(response.get_data(as_text=True))
    schema = (
        {"$schema": "https://json-schema.org/draft/2020-12/schema", "$ref": "urn:pgbus-api" + body["schema"]["$ref"]}
        if "$ref" in body["schema"]
        else body["schema"]
    )
    jsonschema.Draft202012Validator(schema, registry=_REGISTRY).validate(value)
    return value


class Api:
    """A test client for the API: every answer checked against the
    document; *token* sent as a bearer token."""

    def __init__(self, client, token: str | None = None, prefix: str = ""):
        self.client = client
        self.token = token
        self.prefix = prefix
        # (path template, method, status) of every answer checked.
        self.answers: set[tuple[str, str, int]] = set()

    def headers(self, extra=None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return {**headers, **(extra or {})}

    def get(self, url: str, **kwargs):
        response = self.client.get(
            self.prefix + BASE + url, headers=self.headers(kwargs.pop("headers", None)), **kwargs
        )
        response.json_body = check_answer("GET", BASE + url, response)
        self.answers.add((template_of("GET", BASE + url), "get", response.status_code))
        return response

    def post(
        self, url: str, body: Any = None, *, raw: bytes | None = None, content_type: str = "application/json", **kwargs
    ):
        data = raw if raw is not None else (json.dumps(body) if body is not None else b"")
        response = self.client.post(
            self.prefix + BASE + url,
            data=data,
            content_type=content_type,
            headers=self.headers(kwargs.pop("headers", None)),
            **kwargs,
        )
        response.json_body = check_answer("POST", BASE + url, response)
        self.answers.add((template_of("POST", BASE + url), "post", response.status_code))
        return response


def token_for(engine, name: str, role: str) -> str:
    token, _ = tokens.add(engine, name, role)
    return token


def _send(method: str, api: Api, url: str, body: Any = None, **kwargs):
    """A *method* request with a JSON body through *api*, its answer checked against the document."""
    data = json.dumps(body) if body is not None else b""
    response = api.client.open(
        api.prefix + BASE + url,
        method=method,
        data=data,
        content_type="application/json",
        headers=api.headers(kwargs.pop("headers", None)),
        **kwargs,
    )
    response.json_body = check_answer(method, BASE + url, response)
    api.answers.add((template_of(method, BASE + url), method.lower(), response.status_code))
    return response


def put(api: Api, url: str, body: Any = None, **kwargs):
    return _send("PUT", api, url, body, **kwargs)


def patch(api: Api, url: str, body: Any = None, **kwargs):
    return _send("PATCH", api, url, body, **kwargs)
