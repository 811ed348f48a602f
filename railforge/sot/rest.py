"""The source of truth's REST API as `sot push` and `sot diff` use it: plain JSON, in bulk, in parallel.

pynetbox and pynautobot open the session, check the token and read the version. The bulk reads and writes go
through this module instead of their records, for two measured reasons: a record fetches a whole object with one
more GET when code touches an attribute the list did not carry (a no-op push of 62 devices made 62 such hidden
requests), and building records for 124,516 interfaces costs client CPU that the server, on the same cores here,
needs more. Everything else about the API is the products' own: their bulk endpoints, their filters, their
pagination (NetBox's cursor `start`, Nautobot's `offset`), NetBox's `fields` selection.

Nautobot's REST listing has no field selection: every interface comes with its cable, cable peer and connected
endpoint nested (1.5 KB, 6.5 ms of server CPU per interface, measured in benchmarks/bench_sot_scale.py), so the large
classes are read through Nautobot's own GraphQL API (`graphql_all`), which serializes only the fields asked for
(0.4 ms per interface on the same server). Its list queries page by `limit`/`offset` with no count and no page cap;
its filters are the REST filters, which have no `id__gt` (a UUID filter takes only `id`/`id__n`), so there is no
keyset to page by.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from math import ceil
from typing import Any

import requests

PAGE = 1000
"""Objects per read request: the products' default MAX_PAGE_SIZE."""
CHUNK = 100
"""Objects per bulk write request."""
GRAPHQL_PAGE = 5000
"""Objects per GraphQL list request (Nautobot applies no MAX_PAGE_SIZE to GraphQL): 1.8 MB of interfaces."""
RESUME = "; what was written is kept and owned: run the same push again to resume"


class SotError(Exception):
    """A source-of-truth problem the user can act on (bad URL or token, API error, object in the way)."""


class Rest:
    """One product's REST API: `get`, paged reads split over `workers` streams, chunked bulk writes."""

    def __init__(self, session: requests.Session, base_url: str, product: str, workers: int,
                 cursor: bool, timeout_s: float = 900.0):
        self.session = session
        self.base = base_url.rstrip("/")
        self.product = product
        self.workers = workers
        self.cursor = cursor
        """NetBox pages by id (`start`, no count); Nautobot by `offset`."""
        self.timeout_s = timeout_s

    # -- one request ----------------------------------------------------------------------------------------------

    def request(self, method: str, path: str, what: str, params: dict | None = None, body: Any = None) -> Any:
        url = path if path.startswith("http") else f"{self.base}/api/{path.strip('/')}/"
        try:
            resp = self.session.request(method, url, params=params, json=body, timeout=self.timeout_s)
        except requests.RequestException as e:
            raise SotError(f"{what}: no answer from {self.product} ({e.__class__.__name__})") from None
        if resp.status_code >= 400:
            raise SotError(f"{what}: {self.answer_error(resp)}")
        if resp.status_code == 204 or not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            raise SotError(f"{what}: {self.not_the_api()} (HTTP {resp.status_code}, something not JSON as "
                           f"{resp.headers.get('content-type', 'no content type')})") from None
        except RecursionError:
            raise SotError(f"{what}: {self.not_the_api()} (HTTP {resp.status_code}, JSON nested too deep to "
                           f"read)") from None

    def not_the_api(self) -> str:
        return (f"{self.product} at {self.base} answered, but not what the {self.product} API answers: check that "
                f"the URL is the {self.product} server itself, not a proxy or another service")

    def answer_error(self, resp: requests.Response) -> str:
        if resp.status_code in (401, 403):
            return (f"{self.product} refused the token (HTTP {resp.status_code}): check --token-file / "
                    f"RAILFORGE_{self.product.upper()}_TOKEN")
        return f"{self.product} answered HTTP {resp.status_code}: {resp.text[:300]}"

    def get(self, path: str, **params) -> Any:
        return self.request("GET", path, f"reading {path}", params=params)

    def page(self, path: str, **params) -> dict:
        """One page of a listing at `path`, its shape checked."""
        return self.listing(path, self.get(path, **params))

    def listing(self, path: str, answer: Any, count: bool = False) -> dict:
        """`answer` if it is a listing page as the product sends one (an object whose `results` is a list of
        objects; its `count` an integer, or, on NetBox's id-cursor pages, none); else one error naming the
        endpoint, what a listing is and what came instead. Checked where it is read, so a page of the wrong shape
        is never taken for an empty listing or a missing object."""
        results = answer.get("results") if isinstance(answer, dict) else None
        number = answer.get("count") if isinstance(answer, dict) else None
        count = count or not self.cursor
        if isinstance(results, list) and all(isinstance(r, dict) for r in results) and \
                ((isinstance(number, int) and not isinstance(number, bool)) or (number is None and not count)):
            return answer
        expected = "an object with `results` (a list of objects)" + (" and an integer `count`" if count else
                                                                     ", its `count` an integer or none")
        raise SotError(f"reading {self.base}/api/{path.strip('/')}/: expected a listing ({expected}), got "
                       f"{_shape(answer)}: {self.not_the_api()}")

    # -- reads ----------------------------------------------------------------------------------------------------

    def all(self, path: str, **params) -> list[dict]:
        """Every object at `path` matching `params`, read in pages over up to `workers` parallel streams."""
        params = {k: v for k, v in params.items() if v is not None}
        first = self.listing(path, self.get(path, **params, limit=PAGE, **({"ordering": "id"} if self.cursor else {})))
        results = first["results"]
        if not first.get("next"):
            return results
        if self.cursor:
            return results + self._by_id(path, params, results[-1]["id"] + 1)
        size, count = len(results), self.listing(path, first, count=True)["count"]
        offsets = list(range(size, count, size))
        with ThreadPoolExecutor(min(self.workers, len(offsets))) as pool:
            pages = pool.map(lambda o: self.page(path, **params, limit=size, offset=o)["results"], offsets)
            return results + [r for page in pages for r in page]

    def _by_id(self, path: str, params: dict, lo: int) -> list[dict]:
        """The objects with id >= lo: the id range cut into one stream per worker, each paged by cursor."""
        last = self.page(path, **params, limit=1, ordering="-id")["results"]
        if not last or last[0]["id"] < lo:
            return []
        hi = last[0]["id"] + 1
        streams = max(1, min(self.workers, ceil((hi - lo) / PAGE)))
        cuts = [lo + (hi - lo) * i // streams for i in range(streams + 1)]

        def stream(i: int) -> list[dict]:
            out: list[dict] = []
            page = self.page(path, **params, id__lt=cuts[i + 1], start=cuts[i], limit=PAGE)
            while True:
                out += page["results"]
                if not page.get("next") or not page["results"]:
                    return out
                page = self.listing(path, self.request("GET", page["next"], f"reading {path}"))

        with ThreadPoolExecutor(streams) as pool:
            return [r for part in pool.map(stream, range(streams)) for r in part]

    def many(self, path: str, key: str, values: Iterable, **params) -> list[dict]:
        """Objects whose `key` is one of `values`, asked 100 values per request."""
        values = list(values)
        chunks = [values[i:i + 100] for i in range(0, len(values), 100)]
        with ThreadPoolExecutor(max(1, min(self.workers, len(chunks)))) as pool:
            return [r for part in pool.map(lambda c: self.all(path, **params, **{key: c}), chunks) for r in part]

    def graphql(self, query: str) -> dict:
        """The `data` of one GraphQL query (Nautobot's /api/graphql/), its shape checked; an `errors` answer is one
        error naming the endpoint and the first message."""
        path = "graphql"
        answer = self.request("POST", path, f"reading {self.base}/api/graphql/", body={"query": query})
        if isinstance(answer, dict) and answer.get("errors"):
            first = answer["errors"][0] if isinstance(answer["errors"], list) else answer["errors"]
            message = first.get("message") if isinstance(first, dict) else first
            raise SotError(f"reading {self.base}/api/graphql/: {self.product} answered the query with an error: "
                           f"{str(message)[:300]}")
        data = answer.get("data") if isinstance(answer, dict) else None
        if isinstance(data, dict) and all(isinstance(v, list) and all(isinstance(r, dict) for r in v)
                                          for v in data.values()):
            return data
        shape = f"`data` is {_kind(data)}" if isinstance(answer, dict) and "data" in answer else \
            f"an object without `data` (keys: {', '.join(sorted(map(str, answer))[:6]) or 'none'})" \
            if isinstance(answer, dict) else _kind(answer)
        raise SotError(f"reading {self.base}/api/graphql/: expected a GraphQL answer (an object with `data`, its "
                       f"values lists of objects), got {shape}: {self.not_the_api()}")

    def graphql_all(self, name: str, args: dict, selection: str, page: int = GRAPHQL_PAGE) -> list[dict]:
        """Every object of the GraphQL list `name` matching the filters `args` (written as GraphQL literals), with
        the fields in `selection`: pages of `page` by offset over up to `workers` streams, each stream stopping at
        its first short page (the list answers no count)."""
        filters = "".join(f"{k}: {_literal(v)}, " for k, v in args.items() if v is not None)

        def one(offset: int) -> list[dict]:
            data = self.graphql(f"{{ {name}({filters}limit: {page}, offset: {offset}) {{ {selection} }} }}")
            if name not in data:
                raise SotError(f"reading {self.base}/api/graphql/: expected a GraphQL answer with `{name}`, got "
                               f"`data` with {', '.join(sorted(data)) or 'nothing'}: {self.not_the_api()}")
            return data[name]

        def stream(i: int) -> list[dict]:
            out: list[dict] = []
            offset = i * page
            while True:
                got = one(offset)
                out += got
                if len(got) < page:
                    return out
                offset += self.workers * page

        first = one(0)
        if len(first) < page:
            return first
        with ThreadPoolExecutor(self.workers) as pool:
            return first + [r for part in pool.map(stream, range(1, self.workers + 1)) for r in part]

    # -- writes ---------------------------------------------------------------------------------------------------

    def create(self, path: str, what: str, bodies: list[dict], groups: list | None = None,
               chunk: int = CHUNK) -> list[dict]:
        """POST `bodies` in bulk requests run `workers` at a time; the answers in the order of `bodies`. With
        `groups` (one per body), the bodies of one group go in one request, so two requests never hold the same
        group (NetBox counts a device's interfaces in the device's row: two transactions adding interfaces to one
        device wait for each other's row lock, and those waits were most of an interface push's time)."""
        if not bodies:
            return []
        positions = _chunk_positions(len(bodies), groups, chunk)
        with ThreadPoolExecutor(min(self.workers, len(positions))) as pool:
            done = list(pool.map(lambda c: self.request("POST", path, f"creating {what}",
                                                        body=[bodies[i] for i in c]), positions))
        out: list[dict] = [{}] * len(bodies)
        for chunk_positions, answer in zip(positions, done, strict=True):
            if not isinstance(answer, list) or len(answer) != len(chunk_positions):
                raise SotError(f"creating {what}: {self.not_the_api()} (a bulk create of {len(chunk_positions)} "
                               f"answered with something else){RESUME}")
            for i, r in zip(chunk_positions, answer, strict=True):
                out[i] = r
        return out

    def update(self, path: str, what: str, patches: list[dict]) -> None:
        for i in range(0, len(patches), CHUNK):
            self.request("PATCH", path, f"updating {what}", body=patches[i:i + CHUNK])

    def delete(self, path: str, what: str, ids: list) -> None:
        for i in range(0, len(ids), CHUNK):
            self.request("DELETE", path, f"deleting {what}", body=[{"id": x} for x in ids[i:i + CHUNK]])


def _shape(answer: Any) -> str:
    """What a listing answer was instead, in a few words."""
    if not isinstance(answer, dict):
        return _kind(answer)
    results = answer.get("results")
    if "results" not in answer:
        return f"an object without `results` (keys: {', '.join(sorted(map(str, answer))[:6]) or 'none'})"
    if not isinstance(results, list):
        return f"`results` is {_kind(results)}"
    bad = next((r for r in results if not isinstance(r, dict)), None)
    if bad is not None:
        return f"`results` holds {_kind(bad)}"
    return f"`count` is {_kind(answer.get('count'))}" if "count" in answer else "no `count`"


def _literal(value: Any) -> str:
    """A filter value as a GraphQL literal: a list of strings (JSON's string escapes are GraphQL's)."""
    values = value if isinstance(value, list | tuple | set) else [value]
    return "[" + ", ".join(json.dumps(str(v)) for v in values) + "]"


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return {str: "a string", bool: "a boolean", int: "a number", float: "a number", type(None): "null"}.get(
        type(value), type(value).__name__)


def _chunk_positions(n: int, groups: list | None, chunk: int) -> list[list[int]]:
    """Positions 0..n-1 cut into requests of about `chunk`; a group stays whole (a group larger than `chunk` is one
    request of its own)."""
    if groups is None:
        return [list(range(i, min(i + chunk, n))) for i in range(0, n, chunk)]
    members_of: dict[Any, list[int]] = {}
    for i, g in enumerate(groups):
        members_of.setdefault(g, []).append(i)
    out: list[list[int]] = []
    current: list[int] = []
    for members in members_of.values():
        if current and len(current) + len(members) > chunk:
            out.append(current)
            current = []
        current = current + members
    if current:
        out.append(current)
    return out
