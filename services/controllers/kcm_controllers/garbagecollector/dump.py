"""The garbage collector's dependency graph in DOT, as upstream's dump.go writes it.

- `snapshot(graph, uids)` copies what the picture needs out of the live graph in one synchronous
  pass (the event loop is the graph's only writer, so no lock, and nothing is held across an
  await): the whole graph, or with `uids` only the nodes reachable from them through owners
  and dependents. Nodes with neither owners nor dependents are left out, and an owner
  reference to a uid not in the graph becomes a `missing` vertex, as upstream's.
- `render(vertices, edges)` yields the DOT text (`strict digraph full`) in chunks: vertices
  sorted by uid with upstream's attributes and label, then edges dependent -> owner sorted.
  Every string is quoted as Go's `%q` does, so hostile names stay inside their quotes.
- `handler(graph)` is the aiohttp handler the collector serves through `ctx.serve_debug`:
  `text/vnd.graphviz`, `?uid=` repeatable. Upstream bounds neither the graph nor the response;
  this streams it in chunks, yielding to the loop between them, so a large graph never holds
  the controller's loop for the whole write.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass

from aiohttp import web
from kcm_shared.base.goquote import go_quote

from kcm_controllers.garbagecollector import graph

CHUNK = 256  # vertices or edges per write


@dataclass(frozen=True, slots=True)
class Vertex:
    uid: str
    api_version: str
    kind: str
    namespace: str
    name: str
    missing: bool = False
    being_deleted: bool = False
    deleting_dependents: bool = False
    virtual: bool = False

    def group_version(self) -> tuple[str, str]:
        """(group, version) of apiVersion; both empty when it is not one (ParseGroupVersion)."""
        parts = self.api_version.split("/")
        if self.api_version == "" or len(parts) > 2:
            return "", ""
        return ("", parts[0]) if len(parts) == 1 else (parts[0], parts[1])

    def attributes(self) -> list[tuple[str, str]]:
        group, version = self.group_version()
        kind = f"{self.kind}.{version}" + (f".{group}" if group else "")
        label = f"uid={self.uid}\nnamespace={self.namespace}\n{kind}/{self.name}\n"
        flags = [
            word
            for word, on in (
                ("beingDeleted", self.being_deleted),
                ("deletingDependents", self.deleting_dependents),
                ("virtual", self.virtual),
                ("missingFromGraph", self.missing),
            )
            if on
        ]
        if flags:
            label += ",".join(flags) + "\n"
        return [
            ("label", label),
            ("group", group),
            ("version", version),
            ("kind", self.kind),
            ("namespace", self.namespace),
            ("name", self.name),
            ("uid", self.uid),
            ("missing", _bool(self.missing)),
            ("beingDeleted", _bool(self.being_deleted)),
            ("deletingDependents", _bool(self.deleting_dependents)),
            ("virtual", _bool(self.virtual)),
        ]


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _reachable(nodes: dict[str, graph.Node], uids: Iterable[str]) -> dict[str, graph.Node]:
    """The nodes reachable from `uids` through owners and dependents (a uid not in the graph
    is skipped)."""
    found: dict[str, graph.Node] = {}
    pending = list(uids)
    while pending:
        uid = pending.pop()
        node = nodes.get(uid)
        if node is None or uid in found:
            continue
        found[uid] = node
        pending.extend(ref.uid for ref in node.owners if ref.uid not in found)
        pending.extend(dep for dep in node.dependents if dep not in found)
    return found


def snapshot(g: graph.Graph, uids: Iterable[str] | None = None) -> tuple[list[Vertex], list[tuple[str, str]]]:
    """The vertices (sorted by uid) and edges (dependent uid, owner uid; sorted) to draw."""
    nodes = g.nodes if uids is None else _reachable(g.nodes, uids)
    vertices: dict[str, Vertex] = {}
    for node in nodes.values():
        if node.owners or node.dependents:
            i = node.identity
            vertices[i.uid] = Vertex(
                i.uid,
                i.api_version,
                i.kind,
                i.namespace,
                i.name,
                being_deleted=node.being_deleted,
                deleting_dependents=node.deleting_dependents,
                virtual=node.virtual,
            )
    edges: set[tuple[str, str]] = set()
    for node in nodes.values():
        for ref in node.owners:
            if ref.uid not in vertices:
                vertices[ref.uid] = Vertex(ref.uid, ref.api_version, ref.kind, "", ref.name, missing=True)
            edges.add((node.uid, ref.uid))
    return sorted(vertices.values(), key=lambda v: v.uid), sorted(edges)


def render(vertices: list[Vertex], edges: list[tuple[str, str]]) -> Iterator[str]:
    """The DOT text, in chunks of at most CHUNK vertices or edges."""
    yield "strict digraph full {\n"
    if vertices:
        yield "  // Node definitions.\n"
    for start in range(0, len(vertices), CHUNK):
        yield "".join(_vertex(v) for v in vertices[start : start + CHUNK])
    if edges:
        yield "  // Edge definitions.\n"
    for start in range(0, len(edges), CHUNK):
        yield "".join(f"  {go_quote(f)} -> {go_quote(t)};\n" for f, t in edges[start : start + CHUNK])
    yield "}\n"


def _vertex(v: Vertex) -> str:
    attrs = "".join(f"    {key}={go_quote(value)}\n" for key, value in v.attributes())
    return f"  {go_quote(v.uid)} [\n{attrs}  ];\n"


def handler(g: graph.Graph) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """The `/debug/controllers/garbage-collector-controller/graph` handler over `g`."""

    async def serve(request: web.Request) -> web.StreamResponse:
        uids = request.query.getall("uid", [])
        vertices, edges = snapshot(g, uids or None)
        response = web.StreamResponse(
            headers={"Content-Type": "text/vnd.graphviz", "X-Content-Type-Options": "nosniff"}
        )
        await response.prepare(request)
        for chunk in render(vertices, edges):
            await response.write(chunk.encode())
        await response.write_eof()
        return response

    return serve
