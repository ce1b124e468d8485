"""Prometheus's HTTP API (``/api/v1/query``, ``/api/v1/query_range``) through httpx.

Queries go as form-encoded POSTs, so a long PromQL expression never hits a URL length
limit; every failure (refused, timeout, a PromQL error) becomes :class:`PromError` with
Prometheus's own words.
"""

from __future__ import annotations

import math
from typing import Any

import httpx


class PromError(Exception):
    """Prometheus could not be asked, or refused the query (``kind``: its ``errorType``,
    such as ``bad_data`` for a query that does not parse)."""

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind


#: One series of a result: its labels and its (time, value) samples.
Series = tuple[dict[str, str], list[tuple[float, float]]]


class PromClient:
    def __init__(self, base_url: str, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> PromClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ready(self) -> bool:
        try:
            return self._http.get("/-/ready", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def _call(self, path: str, form: dict[str, str]) -> dict[str, Any]:
        try:
            response = self._http.post(path, data=form)
        except httpx.HTTPError as exc:
            raise PromError(f"cannot reach Prometheus at {self.base_url}: {exc}") from None
        try:
            body: Any = response.json()
        except ValueError:
            raise PromError(
                f"Prometheus at {self.base_url} answered {response.status_code} without JSON"
            ) from None
        if not isinstance(body, dict):
            raise PromError(
                f"Prometheus at {self.base_url} answered {response.status_code}: {body!r:.200}"
            )
        if body.get("status") != "success":
            kind = str(body.get("errorType", "error"))
            raise PromError(f"{kind}: {body.get('error', body)}", kind)
        data = body.get("data")
        if not isinstance(data, dict):
            raise PromError(f"Prometheus at {self.base_url} answered without data: {body!r:.200}")
        return data

    def query_raw(self, expr: str, at: float | None = None) -> dict[str, Any]:
        """An instant query's ``data`` as Prometheus gives it (``--query --json``)."""
        form = {"query": expr}
        if at is not None:
            form["time"] = f"{at:.3f}"
        return self._call("/api/v1/query", form)

    def query(self, expr: str, at: float | None = None) -> list[tuple[dict[str, str], float]]:
        """An instant vector: each series' labels and its value (scalars as one series)."""
        data = self.query_raw(expr, at)
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        if data["resultType"] != "vector":
            raise PromError(f"expected an instant vector from {expr!r}, got {data['resultType']}")
        return [(r["metric"], float(r["value"][1])) for r in data["result"]]

    def series(self, match: str, start: float, end: float) -> list[dict[str, str]]:
        """The label sets of every series ``match`` selects between ``start`` and ``end``
        (``/api/v1/series``): which metrics a target exported, without their samples."""
        try:
            response = self._http.post(
                "/api/v1/series",
                data={"match[]": match, "start": f"{start:.3f}", "end": f"{end:.3f}"},
            )
            body: Any = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise PromError(f"cannot list series at {self.base_url}: {exc}") from None
        if not isinstance(body, dict) or body.get("status") != "success":
            said = body.get("error", body) if isinstance(body, dict) else body
            kind = str(body.get("errorType", "error")) if isinstance(body, dict) else None
            raise PromError(f"cannot list series at {self.base_url}: {said!s:.200}", kind)
        data = body.get("data")
        return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        data = self._call(
            "/api/v1/query_range",
            {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"},
        )
        out: list[Series] = []
        for r in data["result"]:
            points = [(float(t), float(v)) for t, v in r["values"]]
            out.append((r["metric"], [(t, v) for t, v in points if math.isfinite(v)]))
        return out
