"""The dependency graph in DOT (kcm_controllers.garbagecollector.dump), against small graphs:
upstream's vertex attributes and labels, the uid filter's reachability, missing owners, Go
quoting of hostile names, and the handler's content type and chunked body."""

from __future__ import annotations

import asyncio

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from kcm_controllers.garbagecollector import dump, graph
from kcm_shared.base.goquote import go_quote

from tests.unit.controllers.garbagecollector.objects import ident, meta, ref

DEPLOY = ident("web", "u-1", kind="Deployment", api_version="apps/v1")
RS = ident("web-5d", "u-2", kind="ReplicaSet", api_version="apps/v1")
POD = ident("web-5d-x", "u-3", kind="Pod")
LONER = ident("alone", "u-9")
OTHER_OWNER = ident("cm", "u-7")
OTHER_DEP = ident("cm-dep", "u-8")


def chain() -> graph.Graph:
    """Deployment <- ReplicaSet <- Pod, an unrelated pair, and an object with no relations."""
    g = graph.Graph()
    g.observe(DEPLOY, meta(DEPLOY))
    g.observe(RS, meta(RS, ref(DEPLOY)))
    g.observe(POD, meta(POD, ref(RS)))
    g.observe(LONER, meta(LONER))
    g.observe(OTHER_OWNER, meta(OTHER_OWNER, deleting=True, finalizers=(graph.FOREGROUND,)))
    g.observe(OTHER_DEP, meta(OTHER_DEP, ref(OTHER_OWNER)))
    return g


def dot(g: graph.Graph, uids: list[str] | None = None) -> str:
    return "".join(dump.render(*dump.snapshot(g, uids)))


def test_whole_graph_has_every_related_node_sorted_and_edges_dependent_to_owner() -> None:
    text = dot(chain())
    assert text.startswith("strict digraph full {\n  // Node definitions.\n")
    assert text.endswith(
        '  // Edge definitions.\n  "u-2" -> "u-1";\n  "u-3" -> "u-2";\n  "u-8" -> "u-7";\n}\n'
    )
    vertices = [line for line in text.splitlines() if line.endswith(" [")]
    assert vertices == ['  "u-1" [', '  "u-2" [', '  "u-3" [', '  "u-7" [', '  "u-8" [']  # no loner


def test_vertex_attributes_and_label_as_upstreams_dump() -> None:
    text = dot(chain(), ["u-2"])
    assert (
        '  "u-2" [\n'
        '    label="uid=u-2\\nnamespace=ns\\nReplicaSet.v1.apps/web-5d\\n"\n'
        '    group="apps"\n'
        '    version="v1"\n'
        '    kind="ReplicaSet"\n'
        '    namespace="ns"\n'
        '    name="web-5d"\n'
        '    uid="u-2"\n'
        '    missing="false"\n'
        '    beingDeleted="false"\n'
        '    deletingDependents="false"\n'
        '    virtual="false"\n'
        "  ];\n"
    ) in text
    deleting = dot(chain(), ["u-7"])
    assert 'label="uid=u-7\\nnamespace=ns\\nConfigMap.v1/cm\\nbeingDeleted,deletingDependents\\n"' in deleting
    assert 'group=""' in deleting


def test_uid_filter_keeps_what_is_reachable_through_owners_and_dependents() -> None:
    g = chain()
    from_pod = dot(g, ["u-3"])
    assert all(f'"{uid}" [' in from_pod for uid in ("u-1", "u-2", "u-3"))
    assert '"u-7"' not in from_pod and '"u-8"' not in from_pod
    several = dot(g, ["u-1", "u-8", "no-such-uid"])
    assert all(f'"{uid}" [' in several for uid in ("u-1", "u-2", "u-3", "u-7", "u-8"))
    assert dot(g, ["no-such-uid"]) == "strict digraph full {\n}\n"


def test_virtual_and_missing_owners() -> None:
    g = graph.Graph()
    g.observe(POD, meta(POD, ref(RS)))  # RS not observed: a virtual node
    text = dot(g)
    assert 'label="uid=u-2\\nnamespace=ns\\nReplicaSet.v1.apps/web-5d\\nvirtual\\n"' in text
    assert 'virtual="true"' in text
    # A graph node naming an owner the graph no longer holds: a vertex from the reference alone.
    del g.nodes["u-2"]
    text = dot(g)
    assert 'label="uid=u-2\\nnamespace=\\nReplicaSet.v1.apps/web-5d\\nmissingFromGraph\\n"' in text
    assert 'missing="true"' in text and '"u-3" -> "u-2";' in text


def test_hostile_strings_stay_quoted_as_go_does() -> None:
    assert go_quote('a"b\\c\nd\x00\u00a0é\U0001f600') == '"a\\"b\\\\c\\nd\\x00\\u00a0é\U0001f600"'
    bad = ident('x"] ; evil [label="', "u-5", kind="K\n", api_version="a/b/c")
    g = graph.Graph()
    g.observe(bad, meta(bad, ref(DEPLOY)))
    text = dot(g, ["u-5"])
    assert 'name="x\\"] ; evil [label=\\""' in text
    assert 'group=""\n    version=""\n    kind="K\\n"' in text  # not a group/version: both empty


def test_large_graph_renders_in_bounded_chunks() -> None:
    g = graph.Graph()
    g.observe(DEPLOY, meta(DEPLOY))
    for n in range(3 * dump.CHUNK):
        dep = ident(f"d{n}", f"d-{n:05}")
        g.observe(dep, meta(dep, ref(DEPLOY)))
    chunks = list(dump.render(*dump.snapshot(g)))
    assert len(chunks) > 6
    assert max(chunk.count(" [\n") for chunk in chunks) <= dump.CHUNK
    assert "".join(chunks).count(' -> "u-1";') == 3 * dump.CHUNK


def test_handler_serves_graphviz_with_repeatable_uid() -> None:
    asyncio.run(_test_handler_serves_graphviz_with_repeatable_uid())


async def _test_handler_serves_graphviz_with_repeatable_uid() -> None:
    application = web.Application()
    application.router.add_get("/graph", dump.handler(chain()))
    async with TestClient(TestServer(application)) as client:
        resp = await client.get("/graph", params=[("uid", "u-3"), ("uid", "u-8")])
        assert resp.status == 200
        assert resp.headers["Content-Type"] == "text/vnd.graphviz"
        assert resp.headers["X-Content-Type-Options"] == "nosniff"
        body = await resp.text()
        assert '"u-3" -> "u-2";' in body and '"u-8" -> "u-7";' in body
        whole = await (await client.get("/graph")).text()
        assert whole == dot(chain())
