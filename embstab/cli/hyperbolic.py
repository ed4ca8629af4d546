"""``embstab hyperbolic``: embed a graph in hyperbolic space, and evaluate an embedding.

    embstab hyperbolic embed GRAPH --method comb|hmds|sgd [options] -o OUT
    embstab hyperbolic eval GRAPH EMBEDDING [--rows N] [--json]

GRAPH is an edge list ``u v [weight]`` (the hyperbolics ``.edges`` format); OUT/EMBEDDING are
embstab hyperbolic embedding files, which carry τ (the scale) and the working precision.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from embstab.cli.options import add_progress, positive_float, positive_int, seed, show_progress
from embstab.errors import EmbstabError

__all__ = ["register", "run_embed", "run_eval"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``hyperbolic`` sub-command (with ``embed`` and ``eval``) to ``subparsers``.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The sub-parsers of the ``embstab`` parser.
    """
    p = subparsers.add_parser(
        "hyperbolic", help="hyperbolic embeddings of graphs (construct, h-MDS, SGD; evaluate)",
        description=__doc__.replace("``", "`"), formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="hyperbolic_command", metavar="{embed,eval}")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

    e = sub.add_parser("embed", help="embed a graph and write the embedding file",
                       description="Embed GRAPH with the combinatorial construction (comb, "
                       "multiprecision), h-MDS (hmds) or Riemannian SGD (sgd).")
    e.add_argument("graph", metavar="GRAPH", help="edge list: 'u v [weight]' per line")
    e.add_argument("--method", choices=("comb", "hmds", "sgd"), default="comb",
                   help="comb: combinatorial construction (default); hmds: h-MDS; sgd: Riemannian SGD; each "
                        "takes the options of its group below")
    e.add_argument("-o", "--output", required=True, help="embedding file to write")
    e.add_argument("--dim", type=int, default=2, help="dimension of H^dim (default 2)")
    g = e.add_argument_group("comb (combinatorial construction)")
    tau = g.add_mutually_exclusive_group()
    tau.add_argument("--eps", type=float, help="target distortion 1+eps (default 0.1)")
    tau.add_argument("--tau", type=float, help="use this scale tau")
    tau.add_argument("--bits", type=int, help="tau for a bit budget (comb.jl -a)")
    g.add_argument("--precision-bits", type=int, default=None,
                   help="working precision in bits (default: just enough for tau, ≥ 256)")
    g.add_argument("--root", default="max_degree",
                   help="max_degree (default), center, first, or a node label")
    g.add_argument("--placement", choices=("codes", "sphere"), default="codes")
    g.add_argument("--tree", choices=("bfs", "steiner"), default="bfs",
                   help="tree to embed: BFS tree (default) or the Gromov-product Steiner "
                   "tree (graphs up to 5000 nodes; only graph nodes are written)")
    g.add_argument("--forest", action="store_true",
                   help="accept a disconnected graph: embed each component around its centre")
    h = e.add_argument_group("hmds")
    h.add_argument("--scale", default="auto", help="h-MDS scale s, or 'auto' (s·diam = 15)")
    h.add_argument("--selection", choices=("positive", "magnitude"), default="positive")
    h.add_argument("--pga", action="store_true", help="refine by hyperbolic PGA")
    s = e.add_argument_group("sgd")
    s.add_argument("--init", choices=("none", "comb", "hmds"), default=None,
                   help="warm start (default hmds; products start near the origin)")
    s.add_argument("--manifold", choices=("poincare", "lorentz", "product"), default="lorentz")
    s.add_argument("--factors", default="H2,H2",
                   help="with --manifold product: factors such as H2,H2,S1 (H Poincaré ball, "
                   "L hyperboloid, E Euclidean, S sphere; --dim is ignored)")
    s.add_argument("--combine", choices=("l2", "l1"), default="l2",
                   help="product distance: sqrt of the sum of squares (the product metric) or sum")
    s.add_argument("--sigma", type=float, default=1.0,
                   help="product: target scale, fitting d = sigma * graph distance (default 1)")
    s.add_argument("--loss", default="rel2", help="rel2, sym, abs, square, log or mse")
    s.add_argument("--epochs", type=positive_int, default=100, help="default 100")
    s.add_argument("--lr", type=positive_float, default=0.01, help="default 0.01")
    s.add_argument("--batch-size", type=positive_int, default=1024, help="default 1024")
    s.add_argument("--seed", type=seed, default=0, help="seed (default 0)")
    add_progress(e)
    e.set_defaults(func=run_embed)

    v = sub.add_parser("eval", help="MAP and distortion of an embedding of a graph",
                       description="Score EMBEDDING against GRAPH: MAP (self excluded, "
                       "pessimistic ties), average and global worst-case distortion.")
    v.add_argument("graph", metavar="GRAPH")
    v.add_argument("embedding", metavar="EMBEDDING")
    v.add_argument("--rows", type=positive_int, default=None,
                   help="evaluate this many random rows (default: all)")
    v.add_argument("--seed", type=seed, default=0, help="seed of the sampled rows (default 0)")
    v.add_argument("--json", action="store_true", help="print one JSON object")
    add_progress(v, quiet_help="no progress bar")
    v.set_defaults(func=run_eval)


#: The options of each method's group, with their defaults: one given for another method would
#: be ignored without a word (SGD's --init comb/hmds start from those methods' defaults).
_METHOD_OPTIONS = {
    "comb": {"eps": None, "tau": None, "bits": None, "precision_bits": None, "root": "max_degree",
             "placement": "codes", "tree": "bfs", "forest": False},
    "hmds": {"scale": "auto", "selection": "positive", "pga": False},
    "sgd": {"init": None, "manifold": "lorentz", "factors": "H2,H2", "combine": "l2", "sigma": 1.0, "loss": "rel2",
            "epochs": 100, "lr": 0.01, "batch_size": 1024, "seed": 0},
}


def _check_method_options(args: argparse.Namespace) -> None:
    """Refuse an option of another method's group (SGD's warm start runs with its initialiser's defaults)."""
    for method, options in _METHOD_OPTIONS.items():
        if method == args.method:
            continue
        for name, default in options.items():
            if getattr(args, name) != default:
                raise EmbstabError(f"--{name.replace('_', '-')} applies to --method {method}, not to --method "
                                   f"{args.method}")


def run_embed(args: argparse.Namespace) -> int:
    """Handler of ``embstab hyperbolic embed``: embed the graph, write the file, print one summary line.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``embed``.

    Returns
    -------
    int
        The exit code, 0.

    Raises
    ------
    HyperbolicError
        For option combinations the methods refuse (e.g. ``--tree steiner --forest`` on a
        disconnected graph, ``--init`` with a product manifold), and any error of the embedding.
    EmbstabError
        GRAPH is a device or pipe, or ``-o`` is GRAPH (or a link to it), a directory, or in a
        missing directory.
    """
    from embstab._fs import check_inputs, check_outputs, check_writable
    from embstab.hyperbolic import HyperbolicError, embed, load_edgelist, save_embedding

    _check_method_options(args)
    inputs = [("GRAPH", args.graph)]
    check_inputs(inputs)
    check_outputs([("-o", args.output)], inputs)
    check_writable(args.output, "-o")
    graph = load_edgelist(args.graph)
    t0 = time.perf_counter()
    progress = show_progress(args)
    if args.method == "comb":
        if args.tree == "steiner" and args.forest and graph.n_components() > 1:
            raise HyperbolicError("--tree steiner does not support --forest on a disconnected "
                                  "graph; embed each component separately or use --tree bfs")
        emb = embed(graph, "combinatorial", dim=args.dim, precision=args.precision_bits, progress=progress,
                    eps=args.eps, tau=args.tau, bits=args.bits, root=args.root, placement=args.placement,
                    forest=args.forest, tree=args.tree)
    elif args.method == "hmds":
        scale = args.scale if args.scale == "auto" else float(args.scale)
        emb = embed(graph, "hmds", dim=args.dim, scale=scale, selection=args.selection, pga=args.pga)
    elif args.manifold == "product":
        if args.init not in (None, "none"):
            raise HyperbolicError("--init applies to poincare/lorentz; a product starts near "
                                  "the origin of each factor")
        emb = embed(graph, "product_sgd", progress=progress, factors=args.factors, combine=args.combine,
                    loss=args.loss, scale=args.sigma, epochs=args.epochs, lr=args.lr,
                    batch_size=args.batch_size, seed=args.seed)
    else:
        init = "hmds" if args.init is None else None if args.init == "none" else args.init
        emb = embed(graph, "sgd", dim=args.dim, progress=progress, manifold=args.manifold, loss=args.loss,
                    init=init, epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, seed=args.seed)
    save_embedding(emb, args.output)
    m = emb.metadata
    extra = ""
    if args.method == "comb":
        where = (f"{m['components']} components" if m.get("forest") else f"root {m['root']}")
        extra = f", {emb.precision_bits} bits (needs {m['bits_needed']}), {where}"
        if m.get("tree") == "steiner":
            extra += f", Steiner tree (+{m['n_steiner']} Steiner nodes)"
    elif args.method == "hmds":
        extra = (f", kept {m['dims_kept']} of {m['dims_requested']} dims "
                 f"({m['n_positive']} positive / {m['n_negative']} negative eigenvalues)")
    space = emb.signature if hasattr(emb, "signature") else f"H^{emb.dim}"
    print(f"wrote {args.output}: {len(emb)} nodes in {space} by {args.method}, "
          f"scale {emb.scale:.6g}{extra}, {time.perf_counter() - t0:.2f} s", file=sys.stderr)  # stdout may be OUT
    return 0


def run_eval(args: argparse.Namespace) -> int:
    """Handler of ``embstab hyperbolic eval``: print MAP and distortion of an embedding of the graph.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``eval`` (``--json`` prints the result as one JSON object).

    Returns
    -------
    int
        The exit code, 0.

    Raises
    ------
    EmbstabError
        GRAPH or EMBEDDING is a device or pipe, or either does not parse.
    """
    from embstab._fs import check_inputs
    from embstab.hyperbolic import evaluate, load_edgelist, load_embedding

    check_inputs([("GRAPH", args.graph), ("EMBEDDING", args.embedding)])
    graph = load_edgelist(args.graph)
    emb = load_embedding(args.embedding)
    res = evaluate(graph, emb, rows=args.rows, seed=args.seed, progress=show_progress(args))
    if args.json:
        print(json.dumps(res.to_dict()))
    else:
        what = f"{res.rows} sampled rows" if res.sampled else "all rows"
        print(f"MAP {res.map:.4f}  d_avg {res.d_avg:.5f}  d_wc {res.d_wc:.4f}  "
              f"bad pairs {res.bad}  ({what}; scale {emb.scale:.6g})")
    return 0


if __name__ == "__main__":  # pragma: no cover
    parser = argparse.ArgumentParser(prog="embstab")
    register(parser.add_subparsers(dest="command"))
    ns = parser.parse_args()
    sys.exit(ns.func(ns))
