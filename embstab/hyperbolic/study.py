"""The hyperbolic study kind: graph-version pairs, hyperbolic embeddings, fixed-point coordinates.

Source pair: a graph that ships with networkx (built in code, no file is read) and a copy with a
share of its edges removed (:func:`embstab.hyperbolic.stability.perturb_graph`, components kept),
both on the same nodes in the same order. Member: :func:`embstab.hyperbolic.embed` of one version
by h-MDS or Riemannian SGD at the row's dimension (SGD from the row's seed; h-MDS is deterministic),
held as float64 Poincaré coordinates. The combinatorial construction is not offered: it needs more
precision than float64 on most graphs, and a member is stored in float64.

Compression: at 32 bits the coordinates are rounded to float32 (a point that lands on or outside the
unit ball is pulled back along its ray to radius ``1 - 2^-24``); below, each coordinate is rounded
to fixed point with ``bits - 1`` fraction bits (:func:`embstab.hyperbolic.stability.quantize_coordinates`
through :mod:`embstab.lowprec`), and a decoded point that falls on or outside the unit ball is pulled
back along its ray to radius ``1 - 2^-(bits-1)`` (a decoding rule: nothing more is stored). Memory is
bits per node: dimension x bits.

Measures: the hyperbolic measures of :mod:`embstab.measures.hyperbolic` (k-NN overlap, neighbour MAP,
distortion of the decoded distances) on every node; they state no null of their own, so this kind
draws one by shuffling the old member's rows (:data:`embstab.study.steps.NULL_SETTINGS` shuffles).

Downstream, task ``reconstruction``: each compressed member's graph-reconstruction MAP on its own
graph version (:func:`embstab.hyperbolic.metrics.evaluate`, in percent) is its quality; the
disagreement is the share of nodes whose nearest neighbour (by decoded distance, ties to the
lower row) differs between the two compressed members; the chance level is the MAP of a random
embedding of the new version (one draw from the row's seed).
"""

from __future__ import annotations

import functools
import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from embstab.compress.memory import memory_bits
from embstab.errors import did_you_mean
from embstab.study.kinds import StudyKind
from embstab.study.settings import Setting, TaskRule, member_config, source_config
from embstab.study.steps import Steps, downstream_output, guarded, stored
from embstab.study.store import ArtifactStore, config_hash

__all__ = ["KIND", "GRAPHS", "ALGORITHMS", "TRAINING", "HyperbolicGraphSpec", "parse_graph", "check_algorithms",
           "check_study", "tasks", "load_graph", "hyperbolic_source_config", "hyperbolic_train_config",
           "decode_fixed_point", "measure_pair", "nearest_neighbours", "run_source", "run_train", "run_compress",
           "run_downstream"]

#: Graphs a study can name: networkx's built-in graphs (their edges are in networkx's code).
GRAPHS = {
    "les_miserables": "les_miserables_graph",
    "karate_club": "karate_club_graph",
    "florentine_families": "florentine_families_graph",
    "davis_southern_women": "davis_southern_women_graph",
}
#: Embedding methods of :func:`embstab.hyperbolic.embed` a study trains.
ALGORITHMS = ("hmds", "sgd")
#: ``training`` settings of a hyperbolic study (SGD's; h-MDS has none).
TRAINING = {
    "epochs": Setting(100, "int", 1, 100_000),
    "lr": Setting(0.1, "float", 1e-8, 10.0),
}
#: Bit widths below this refuse: one bit holds only {-1, 0}, every point would decode to the origin.
MIN_BITS = 2


@dataclass(frozen=True)
class HyperbolicGraphSpec:
    """The graph-version pair: a named graph and the share of its edges the second version loses."""

    name: str
    remove: float = 0.05
    seed: int = 0


def parse_graph(v: Any, value: Any) -> HyperbolicGraphSpec:
    """The ``graph`` section: ``{name*, remove: 0.05, seed: 0}``.

    Parameters
    ----------
    v : validator
        The schema's validator (its ``fail`` builds the error naming the key).
    value : Any
        The section as read from the study file.

    Returns
    -------
    HyperbolicGraphSpec
        The section with its defaults filled in.

    Raises
    ------
    StudyDefinitionError
        An unknown graph, a share outside (0, 1) or a negative seed, naming its key.
    """
    g = v.mapping(value, "graph", {"name": True, "remove": False, "seed": False})
    name = v.string(g["name"], "graph.name")
    if name not in GRAPHS:
        hint = did_you_mean(name, GRAPHS)
        raise v.fail("graph.name", f"unknown graph {name!r} (choose from {', '.join(GRAPHS)}){hint}")
    return HyperbolicGraphSpec(name=name,
                               remove=v.number(g.get("remove", 0.05), "graph.remove", 0.0, 1.0, open_low=True,
                                               open_high=True),
                               seed=v.integer(g.get("seed", 0), "graph.seed", 0))


def check_algorithms(v: Any, value: Any) -> tuple[str, ...]:
    """``training.algorithms`` of a hyperbolic study: ``hmds`` and/or ``sgd``.

    Parameters
    ----------
    v : validator
        The schema's validator.
    value : Any
        The list as read from the study file.

    Returns
    -------
    tuple of str
        The method names.

    Raises
    ------
    StudyDefinitionError
        Another name (``combinatorial`` with the reason), naming its key.
    """
    items = v.sequence(value, "training.algorithms")
    for i, item in enumerate(items):
        if item == "combinatorial":
            raise v.fail(f"training.algorithms[{i}]", "the combinatorial construction needs more precision than "
                                                      "the float64 a study stores on most graphs; use hmds or sgd")
    return v.str_list(items, "training.algorithms", ALGORITHMS)


def check_study(v: Any, spec: Any) -> None:
    """Cross-checks: every bit width holds at least one fraction bit; every dimension is at most n − 1.

    Parameters
    ----------
    v : validator
        The schema's validator.
    spec : StudySpec
        The parsed study.

    Raises
    ------
    StudyDefinitionError
        For a bit width below :data:`MIN_BITS`, or a dimension above n − 1 for the graph's n nodes
        (n points span at most n − 1 dimensions, and h-MDS refuses more: every row would fail),
        naming its key.
    """
    n = load_graph(spec.source_spec.name).n_nodes
    for i, dim in enumerate(spec.training.dimensions):
        if dim > n - 1:
            raise v.fail(f"training.dimensions[{i}]", f"dimension {dim} is more than n - 1 = {n - 1} for graph "
                                                      f"{spec.source_spec.name!r} ({n} nodes): n points span at most "
                                                      f"n - 1 dimensions; use at most {n - 1}")
    for i, bits in enumerate(spec.compression.bit_widths):
        if bits < MIN_BITS:
            raise v.fail(f"compression.bit_widths[{i}]", f"{bits} bit holds no fraction bit of a coordinate in "
                                                         f"(-1, 1); a hyperbolic study needs at least {MIN_BITS}")


def tasks() -> dict[str, TaskRule]:
    """The downstream task of a hyperbolic study.

    Returns
    -------
    dict of str to TaskRule
        ``reconstruction`` with the decision rule ``nearest_neighbour``.
    """
    return {"reconstruction": TaskRule(("nearest_neighbour",), {})}


def load_graph(name: str) -> Any:
    """A named graph of :data:`GRAPHS` as an :class:`embstab.hyperbolic.graph.Graph` (string labels).

    Parameters
    ----------
    name : str
        A key of :data:`GRAPHS`.

    Returns
    -------
    Graph

    Raises
    ------
    UnknownNameError
        For a name not in :data:`GRAPHS`.
    """
    import networkx as nx  # noqa: PLC0415

    from embstab.errors import lookup  # noqa: PLC0415
    from embstab.hyperbolic.graph import Graph  # noqa: PLC0415

    g = getattr(nx, lookup(GRAPHS, name, "graph"))()
    return Graph.from_edges([(str(a), str(b)) for a, b in g.edges()], nodes=[str(n) for n in g.nodes()], name=name)


def hyperbolic_source_config(spec: Any) -> dict[str, Any]:
    """The graph-version pair's configuration (every other configuration nests it).

    Parameters
    ----------
    spec : StudySpec
        The study.

    Returns
    -------
    dict
        Plan and embstab versions, stage ``graph``, ``kind`` and the graph section's fields.
    """
    return source_config("graph", spec.source_spec, kind="hyperbolic")


def hyperbolic_train_config(spec: Any, side: str, v: Any) -> dict[str, Any]:
    """One embedding of one graph version: method, dimension, seed and settings.

    Parameters
    ----------
    spec : StudySpec
        The study.
    side : str
        ``old`` or ``new``.
    v : Variant
        The grid point.

    Returns
    -------
    dict
        The member's configuration (:func:`embstab.study.settings.member_config`).
    """
    return member_config(spec, side, v, hyperbolic_source_config(spec))


# --------------------------------------------------------------------------------------------
# store codecs and conversions


def _graph_bytes(graph: Any) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, labels=np.array([str(x) for x in graph.labels], dtype=str), edges=graph.edge_list())
    return buf.getvalue()


@functools.lru_cache(maxsize=4)
def _graph(store: ArtifactStore, kind: str, key: str) -> Any:
    from embstab.hyperbolic.graph import Graph  # noqa: PLC0415

    with np.load(io.BytesIO(store.get_bytes(kind, key, "npz")), allow_pickle=False) as z:
        labels = z["labels"].tolist()
        edges = [(labels[a], labels[b]) for a, b in z["edges"].tolist()]
    return Graph.from_edges(edges, nodes=labels)


def _hyperbolic(emb: Any) -> Any:
    """The :class:`~embstab.hyperbolic.HyperbolicEmbedding` an :class:`~embstab.Embedding` member holds."""
    from embstab.hyperbolic.embedding import HyperbolicEmbedding  # noqa: PLC0415

    return HyperbolicEmbedding(np.asarray(emb.vectors, dtype=np.float64), scale=float(emb.metadata.get("scale", 1.0)),
                               nodes=list(emb.words))


def _inside_ball(coords: np.ndarray, fraction_bits: int) -> np.ndarray:
    """Points that rounding put on or outside the unit ball, pulled back along their ray to radius
    ``1 - 2^-fraction_bits`` (a decoding rule: compare refuses points off the ball)."""
    norms = np.sqrt(np.sum(coords * coords, axis=1))
    out = norms >= 1.0
    if np.any(out):
        coords = coords.copy()
        coords[out] *= ((1.0 - 2.0 ** -fraction_bits) / norms[out])[:, None]
    return coords


def decode_fixed_point(coords: np.ndarray, bits: int) -> np.ndarray:
    """Fixed-point coordinates as Poincaré points: a point on or outside the unit ball is pulled
    back along its ray to radius ``1 - 2^-(bits-1)``.

    Parameters
    ----------
    coords : numpy.ndarray
        Rounded coordinates, one point per row.
    bits : int
        Bits per coordinate (``bits - 1`` fraction bits).

    Returns
    -------
    numpy.ndarray
        float64 points strictly inside the unit ball.
    """
    out = np.array(coords, dtype=np.float64)
    limit = 1.0 - 2.0 ** -(bits - 1)
    norms = np.linalg.norm(out, axis=1)
    outside = norms >= 1.0
    out[outside] *= (limit / norms[outside])[:, None]
    return out


def nearest_neighbours(emb: Any) -> np.ndarray:
    """Each node's nearest other node by decoded distance (ties to the lower row).

    Parameters
    ----------
    emb : HyperbolicEmbedding
        The embedding.

    Returns
    -------
    numpy.ndarray
        Row index of each row's nearest neighbour.
    """
    out = np.empty(len(emb), dtype=np.int64)
    for i in range(len(emb)):
        d = np.array(emb.distances_from(i), dtype=np.float64)
        d[i] = np.inf
        out[i] = int(np.argmin(d))
    return out


def measure_pair(old: Any, new: Any, anchor_old: Any, anchor_new: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """The hyperbolic measures of one pair, old member first, and their nulls from shuffled rows of the old member.

    The anchors are not used: the hyperbolic measures compare the pair's decoded distances. The
    new member's distances are the reference of the distortions and of the MAP (those measures are
    not symmetric; ``reference="new"``), as the kind's stored values have always been read.
    ``knn`` (the shared self-agreement check) is read as ``hyperbolic_knn``.

    Parameters
    ----------
    old, new : Embedding
        The compressed pair (Poincaré coordinates, node labels as words).
    anchor_old, anchor_new : Embedding
        The anchors (unused).
    config : mapping
        ``names``, ``params`` and optionally ``null`` (``samples``, ``seed``), as
        :func:`embstab.study.steps.measure_pair` takes them.

    Returns
    -------
    dict
        Measure name → value, ``n_words`` (the number of nodes) and, with ``null``, ``nulls``.
    """
    from embstab.hyperbolic.embedding import HyperbolicEmbedding  # noqa: PLC0415
    from embstab.measures.compare import compare  # noqa: PLC0415 (the package attribute may be the module)

    old_member, new_member = _hyperbolic(old), _hyperbolic(new)
    asked = list(config["names"])
    real = {name: "hyperbolic_knn" if name == "knn" else name for name in asked}
    given = dict(config.get("params") or {})
    params = {real[n]: {**{k: val for k, val in dict(given.get(n) or {}).items() if k in ("k", "rows", "seed")},
                        "reference": "new"} for n in asked}

    def values(old_side: Any) -> dict[str, float]:
        df = compare(old_side, new_member, measures=list(real.values()), params=params)
        by_name = dict(zip(df["measure"], df["value"]))
        return {n: float(by_name[real[n]]) for n in asked}

    out: dict[str, Any] = {"n_words": float(len(new_member)), **values(old_member)}
    null = dict(config.get("null") or {})
    samples = int(null.get("samples", 0))
    if samples:
        coords = np.asarray(old.vectors, dtype=np.float64)
        draws = []
        for s in range(samples):
            perm = np.random.default_rng(int(null.get("seed", 0)) + s).permutation(len(coords))
            draws.append(values(HyperbolicEmbedding(coords[perm], scale=old_member.scale,
                                                    nodes=list(new_member.nodes))))
        out["nulls"] = {n: {"value": float(np.mean([d[n] for d in draws])),
                            "spread": float(np.std([d[n] for d in draws], ddof=1)) if samples > 1 else 0.0,
                            "samples": samples, "method": "permutation"} for n in asked}
    return out


# --------------------------------------------------------------------------------------------
# task functions


@guarded("graph")
@stored(("file", "hgraph_new", "npz"), ("file", "hgraph_old", "npz"))
def run_source(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any]) -> str:
    """Build the graph and its copy with edges removed (artifacts ``hgraph_old``/``hgraph_new``).

    Parameters
    ----------
    store : ArtifactStore
        Where inputs are read and outputs written.
    steps : Steps
        The computations bundle (unused: passed for the uniform task signature).
    key : str
        The task's configuration hash (the name of its artifacts).
    config : mapping
        The task's configuration.

    Returns
    -------
    str
        ``key``.
    """
    from embstab.hyperbolic.stability import perturb_graph  # noqa: PLC0415

    graph = load_graph(config["name"])
    store.put_bytes("hgraph_old", key, "npz", _graph_bytes(graph), config)
    store.put_bytes("hgraph_new", key, "npz", _graph_bytes(perturb_graph(graph, config["remove"], config["seed"])),
                    config)
    return key


@guarded("train")
@stored(("embedding", "embedding"))
def run_train(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any], source_key: str) -> str:
    """Embed one graph version (artifact ``embedding``: Poincaré coordinates, node labels as words).

    Parameters
    ----------
    store : ArtifactStore
        Where inputs are read and outputs written.
    steps : Steps
        The computations bundle (unused: passed for the uniform task signature).
    key : str
        The task's configuration hash (the name of its artifacts).
    config : mapping
        The task's configuration.
    source_key : str
        The graph-version pair's artifacts.

    Returns
    -------
    str
        ``key``.
    """
    import embstab.hyperbolic as H  # noqa: PLC0415 - read at call time: the method is looked up there

    from embstab.embedding import Embedding  # noqa: PLC0415

    graph = _graph(store, f"hgraph_{config['side']}", source_key)
    options = ({"seed": int(config["seed"]), "epochs": int(config["epochs"]), "lr": float(config["lr"])}
               if config["algo"] == "sgd" else {})
    emb = H.embed(graph, config["algo"], dim=int(config["dim"]), **options)
    coords = emb.poincare64(check=False)
    store.put_embedding("embedding", key, Embedding([str(n) for n in emb.nodes], coords,
                                                    metadata={"scale": float(emb.scale), "method": config["algo"]}),
                        config)
    return key


@guarded("compress")
@stored(("embedding", "pair_new"), ("embedding", "pair_old"))
def run_compress(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any], old_key: str,
                 new_key: str) -> str:
    """Round both members' coordinates to the row's bits (artifacts ``pair_old``/``pair_new``).

    Parameters
    ----------
    store : ArtifactStore
        Where inputs are read and outputs written.
    steps : Steps
        The computations bundle (unused: passed for the uniform task signature).
    key : str
        The task's configuration hash (the name of its artifacts).
    config : mapping
        The task's configuration (``bits``, ``rounding``, ``seed``).
    old_key, new_key : str
        The trained members' artifacts.

    Returns
    -------
    str
        ``key``.
    """
    from embstab.hyperbolic.stability import quantize_coordinates  # noqa: PLC0415
    from embstab.lowprec import FixedFormat  # noqa: PLC0415

    bits = int(config["bits"])
    for kind, member_key in (("pair_old", old_key), ("pair_new", new_key)):
        member = store.get_embedding("embedding", member_key)
        if bits >= 32:
            coords = _inside_ball(np.asarray(member.vectors, dtype=np.float32).astype(np.float64), 24)
        else:
            seed = int(config["seed"]) if config["rounding"].startswith("stochastic") else None
            q = quantize_coordinates(_hyperbolic(member), FixedFormat(bits, bits - 1), rounding=config["rounding"],
                                     generator=seed)
            coords = decode_fixed_point(q.poincare64(check=False), bits)
        compression = {"bits": bits, "format": "float32" if bits >= 32 else f"fixed({bits},{bits - 1})",
                       "memory_bits_per_word": float(memory_bits(member.dim, min(bits, 32)))}
        store.put_embedding(kind, key, member.with_vectors(coords, compression=compression), config)
    return key


@guarded("downstream")
@stored(("json", "downstream"), load=True)
def run_downstream(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any],
                   pair_key: str) -> dict[str, Any]:
    """Graph reconstruction of each compressed member, and how many nearest neighbours differ.

    Parameters
    ----------
    store : ArtifactStore
        Where inputs are read and outputs written.
    steps : Steps
        The computations bundle (unused: passed for the uniform task signature).
    key : str
        The task's configuration hash (the name of its artifacts).
    config : mapping
        The task's configuration.
    pair_key : str
        The compressed pair's artifacts.

    Returns
    -------
    dict
        ``disagreement`` (% of nodes whose nearest neighbour differs), the qualities
        (:func:`embstab.study.steps.downstream_output`: the old member's reconstruction MAP on the old
        graph and the new member's on the new graph, %),
        ``chance`` (MAP of a random embedding of the new graph, %), ``n_test`` (nodes) and ``details``.
    """
    from embstab.hyperbolic.embedding import HyperbolicEmbedding  # noqa: PLC0415
    from embstab.hyperbolic.metrics import evaluate  # noqa: PLC0415

    source_key = config_hash(config["pair"]["new"]["source"])
    g_new, g_old = _graph(store, "hgraph_new", source_key), _graph(store, "hgraph_old", source_key)
    new = _hyperbolic(store.get_embedding("pair_new", pair_key))
    old = _hyperbolic(store.get_embedding("pair_old", pair_key))
    e_new, e_old = evaluate(g_new, new, progress=False), evaluate(g_old, old, progress=False)
    flipped = nearest_neighbours(new) != nearest_neighbours(old)
    # a random embedding of the same size: points uniform in direction, radius uniform in the ball
    rng = np.random.default_rng(int(config["seed"]))
    x = rng.standard_normal((len(new), int(new.dim)))
    x *= (rng.uniform(0.0, 0.99, len(new)) / np.linalg.norm(x, axis=1))[:, None]
    chance = evaluate(g_new, HyperbolicEmbedding(x, nodes=list(new.nodes)), progress=False)
    value = downstream_output(100.0 * float(flipped.mean()), 100.0 * float(e_old.map), 100.0 * float(e_new.map),
                              int(len(new)), chance=100.0 * float(chance.map),
                              details={"quality_metric": "graph reconstruction MAP (%)", "d_avg": float(e_new.d_avg),
                                       "d_avg_old": float(e_old.d_avg)})
    store.put_json("downstream", key, value, config)
    return value


KIND = StudyKind(
    name="hyperbolic", label="hyperbolic graph embeddings (Poincaré coordinates)", memory_unit="bits per node",
    source_key="graph", parse_source=parse_graph, algorithms=check_algorithms, training=TRAINING, tasks=tasks,
    check=check_study, source_config=hyperbolic_source_config, train_config=hyperbolic_train_config,
    run_source=run_source, run_train=run_train, run_compress=run_compress, run_downstream=run_downstream,
    geometry="hyperbolic", measure_pair=measure_pair,
)
