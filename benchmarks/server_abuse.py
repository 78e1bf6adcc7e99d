"""Load and abuse for ``textorch serve``: concurrent raw-socket clients mixing valid, malformed,
oversized and slow requests, each checked against what it must get back.

Shared by ``benchmarks/features/soak_server.py`` (long) and ``tests/serve/test_server_soak.py``
(short), with the served models of :mod:`benchmarks.tiny_server`. Raw sockets rather than an
HTTP library, because the abuse needs what a library will not send:
bytes that are not HTTP, a declared length the body never reaches, headers a byte at a time.

Every request is one connection. A *valid* request must be answered 200 with the answer the
Python API gives for the same input; every other kind has one expected outcome (a status, or
the connection closed); any 5xx, and any valid request answered otherwise, is a failure.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

CLOSED = 0
"""Status recorded when the server closed the connection without an answer."""


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class Request:
    """One request: the bytes to send (in pieces, with a pause between), and how to judge the reply."""

    kind: str
    pieces: list[bytes]
    pause_s: float = 0.0
    expect: tuple[int, ...] = (200,)
    check: Callable[[dict], str | None] | None = None
    """For a 200: None when the JSON answer is right, else what is wrong."""
    read: bool = True
    """False: the client hangs up without reading the answer."""
    hold_s: float = 0.0
    """After the last piece, wait this long before reading (a client that stalls)."""


@dataclass
class Report:
    counts: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    latencies: dict[str, list[float]] = field(default_factory=dict)

    def record(self, request: Request, status: int, problem: str | None, seconds: float) -> None:
        self.counts[request.kind] += 1
        self.statuses[status] += 1
        self.latencies.setdefault(request.kind, []).append(seconds)
        if problem:
            self.failures.append(f"{request.kind}: {problem}")

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)


async def _read_reply(reader: asyncio.StreamReader, timeout_s: float) -> Reply:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout_s)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    if "content-length" in headers:
        body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), timeout_s)
    else:
        body = await asyncio.wait_for(reader.read(), timeout_s)
    return Reply(status, headers, body)


async def send(host: str, port: int, request: Request, timeout_s: float = 60.0) -> Reply:
    """Send one request on a new connection; ``Reply(CLOSED, ...)`` when the server hung up."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    try:
        for i, piece in enumerate(request.pieces):
            if i and request.pause_s:
                await asyncio.sleep(request.pause_s)
            writer.write(piece)
            await writer.drain()
        if request.hold_s:
            await asyncio.sleep(request.hold_s)
        if not request.read:
            return Reply(CLOSED, {}, b"")
        return await _read_reply(reader, timeout_s)
    except (asyncio.IncompleteReadError, ConnectionError):
        return Reply(CLOSED, {}, b"")
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except ConnectionError:
            pass


def judge(request: Request, reply: Reply) -> str | None:
    """What is wrong with ``reply`` for ``request``, or None."""
    if reply.status not in request.expect:
        return f"status {reply.status} (expected {request.expect}): {reply.body[:200]!r}"
    if reply.status == 200 and request.check is not None:
        try:
            document = json.loads(reply.body)
        except ValueError as exc:
            return f"answer is not JSON ({exc})"
        return request.check(document)
    return None


async def run_load(host: str, port: int, requests: list[Request], clients: int,
                   on_progress: Callable[[int], None] | None = None) -> Report:
    """Send ``requests`` from ``clients`` concurrent clients (each takes the next one in turn)."""
    report = Report()
    queue: asyncio.Queue[Request] = asyncio.Queue()
    for request in requests:
        queue.put_nowait(request)
    done = 0

    async def client() -> None:
        nonlocal done
        while True:
            try:
                request = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            started = time.perf_counter()
            try:
                reply = await send(host, port, request)
                problem = judge(request, reply) if request.read else None
            except (asyncio.TimeoutError, OSError) as exc:
                reply, problem = Reply(CLOSED, {}, b""), f"no answer ({type(exc).__name__}: {exc})"
            report.record(request, reply.status, problem, time.perf_counter() - started)
            done += 1
            if on_progress is not None:
                on_progress(done)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    report.seconds = time.perf_counter() - started
    return report


# ----------------------------------------------------------------------------- the request mix
def http(method: str, path: str, body: bytes = b"", content_type: str = "application/json",
         extra: str = "", length: int | None = None) -> bytes:
    head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body) if length is None else length}\r\n{extra}\r\n")
    return head.encode("latin-1") + body


def _pieces(data: bytes, n: int) -> list[bytes]:
    size = max(len(data) // n, 1)
    return [data[i : i + size] for i in range(0, len(data), size)]


@dataclass
class Expected:
    """Answers of the Python API for the texts the valid requests draw from."""

    tagger: str
    classifier: str
    texts: list[str]
    tags: dict[str, dict]
    """text -> that text's record in ``labeler.tag([text])``."""
    classes: dict[str, dict]
    """text -> ``{"labels", "scores"}`` from ``classifier.predict([text])``."""


def _check_tags(texts: list[str], expected: Expected) -> Callable[[dict], str | None]:
    def check(document: dict) -> str | None:
        got = document.get("texts", [])
        if len(got) != len(texts):
            return f"{len(got)} texts answered for {len(texts)}"
        for text, record in zip(texts, got):
            want = expected.tags[text]
            if record["text"] != want["text"]:
                return f"text {record['text']!r} != {want['text']!r}"
            strip = [{k: v for k, v in e.items() if k != "score"} for e in record["entities"]]
            if strip != [{k: v for k, v in e.items() if k != "score"} for e in want["entities"]]:
                return f"entities of {text!r}: {record['entities']} != {want['entities']}"
            if any(abs(a["score"] - b["score"]) > 1e-4 for a, b in zip(record["entities"], want["entities"])):
                return f"entity scores of {text!r} differ"
        return None

    return check


def _check_classes(texts: list[str], expected: Expected) -> Callable[[dict], str | None]:
    def check(document: dict) -> str | None:
        got = document.get("classifications", [])
        if len(got) != len(texts):
            return f"{len(got)} classifications for {len(texts)} texts"
        for text, record in zip(texts, got):
            want = expected.classes[text]
            if record["labels"] != want["labels"]:
                return f"labels of {text!r}: {record['labels']} != {want['labels']}"
            if any(abs(record["scores"][c] - p) > 1e-4 for c, p in want["scores"].items()):
                return f"scores of {text!r} differ"
        return None

    return check


MALFORMED_BODIES: list[tuple[bytes, int]] = [
    (b'{"texts": [', 400),
    (b'{"texts": ["a"]', 400),
    (b"\xff\xfe not utf-8", 400),
    (b"[" * 4000 + b"]" * 4000, 400),
    (b'{"texts": 5}', 422),
    (b'{"texts": [1, 2]}', 422),
    (b'{"texts": [null]}', 422),
    (b'{"words": ["a"]}', 422),
    (b"null", 422),
    (b'{"texts": ["a"], "sequences": [["a"]]}', 422),
    (b'{"sequences": [[["Mary", "extra"]]]}', 422),
    (b'{"sequences": [[[]]]}', 422),
]


def build_requests(expected: Expected, n: int, max_bytes: int, client_timeout_s: float, seed: int = 0,
                   slow_share: float = 0.02, stall_share: float = 0.005) -> list[Request]:
    """``n`` requests: about half valid (tag, pre-tokenised tag, classify, slow), the rest abuse."""
    rng = random.Random(seed)
    tag, classify = f"/models/{expected.tagger}/tag", f"/models/{expected.classifier}/classify"

    def tag_texts() -> Request:
        texts = rng.sample(expected.texts, rng.randint(1, 3))
        return Request("valid tag", [http("POST", tag, json.dumps({"texts": texts}).encode())],
                       check=_check_tags(texts, expected))

    def tag_tokens() -> Request:
        text = rng.choice(expected.texts)
        tokens = [e for e in text.split() if e]
        body = json.dumps({"sequences": [tokens]}).encode()

        def check(document: dict) -> str | None:
            record = document["texts"][0] if document.get("texts") else {}
            return None if len(record.get("labels", [])) == len(tokens) else f"labels {record.get('labels')} for {tokens}"

        return Request("valid tokens", [http("POST", tag, body)], check=check)

    def classify_texts() -> Request:
        texts = rng.sample(expected.texts, rng.randint(1, 3))
        return Request("valid classify", [http("POST", classify, json.dumps({"texts": texts}).encode())],
                       check=_check_classes(texts, expected))

    def slow_valid() -> Request:  # a few bytes at a time, well within the client timeout
        texts = [rng.choice(expected.texts)]
        data = http("POST", tag, json.dumps({"texts": texts}).encode())
        pieces = _pieces(data, 12)
        return Request("slow valid", pieces, pause_s=min(0.4, client_timeout_s / 3) / len(pieces),
                       check=_check_tags(texts, expected))

    def malformed() -> Request:
        body, status = rng.choice(MALFORMED_BODIES)
        return Request("malformed", [http("POST", tag, body)], expect=(status,))

    def wrong_type() -> Request:
        return Request("wrong content type", [http("POST", tag, b'{"texts": ["a"]}', "text/plain")], expect=(415,))

    def oversized() -> Request:
        if rng.random() < 0.5:  # declared: refused from the headers alone
            return Request("oversized", [http("POST", tag, b"", length=max_bytes + 1)], expect=(413,))
        chunk = b"x" * 4096  # undeclared (chunked): refused once the limit is passed
        body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(max_bytes // 4096 + 2)) + b"0\r\n\r\n"
        head = (f"POST {tag} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\n\r\n").encode()
        return Request("oversized", [head + body], expect=(413, CLOSED))

    def unknown() -> Request:
        path = rng.choice(["/models/nope/tag", f"/models/{expected.classifier}/tag", "/nothing", "/models/%00/tag"])
        return Request("unknown path", [http("POST", path, b'{"texts": ["a"]}')], expect=(404,))

    def garbage() -> Request:
        noise = bytes(rng.randrange(256) for _ in range(rng.randint(1, 300)))
        return Request("not http", [noise + b"\r\n\r\n"], expect=(400, CLOSED))

    def abandon() -> Request:  # sends a valid request and hangs up without reading
        return Request("abandoned", [http("POST", tag, json.dumps({"texts": expected.texts[:2]}).encode())], read=False)

    def stalled() -> Request:  # stops sending: the server must drop it after the client timeout
        data = http("POST", tag, json.dumps({"texts": ["Mary lives in Rome ."]}).encode())
        cut = rng.choice([20, len(data) - 5])  # inside the headers, or inside the body
        return Request("stalled", [data[:cut]], hold_s=client_timeout_s + 1.0, expect=(408, CLOSED))

    kinds: list[tuple[Callable[[], Request], float]] = [
        (tag_texts, 0.30), (tag_tokens, 0.08), (classify_texts, 0.14), (slow_valid, slow_share),
        (malformed, 0.16), (wrong_type, 0.04), (oversized, 0.08), (unknown, 0.06), (garbage, 0.05),
        (abandon, 0.03), (stalled, stall_share),
    ]
    makers, weights = zip(*kinds)
    return [rng.choices(makers, weights)[0]() for _ in range(n)]


def valid_kinds() -> set[str]:
    return {"valid tag", "valid tokens", "valid classify", "slow valid"}


def summary(report: Report) -> dict[str, Any]:
    """Counts, statuses and latency percentiles per kind, for printing or JSON."""
    kinds = {}
    for kind, values in sorted(report.latencies.items()):
        ordered = sorted(values)
        kinds[kind] = {"n": len(ordered), "p50_ms": round(1000 * ordered[len(ordered) // 2], 1),
                       "p99_ms": round(1000 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 1)}
    return {"requests": sum(report.counts.values()), "seconds": round(report.seconds, 2),
            "statuses": {str(k): v for k, v in sorted(report.statuses.items())}, "kinds": kinds,
            "failures": report.failures[:20], "n_failures": len(report.failures)}
