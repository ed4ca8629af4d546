"""embstab.kg.train vs PyKEEN's own pipeline(): same settings, same process, alternating order, medians.

For each model, ``--repeats`` rounds run both sides with identical settings and seed; the order
alternates between rounds (pipeline first, then embstab first) so that neither side is favoured by
a warmer cache or a smaller heap, and the table gives medians. Reported per side:

* filtered test MRR / Hits@10 (PyKEEN's rank-based evaluator, realistic ranks, both sides);
* training seconds per epoch (the training loop only, as ``pipeline``'s ``train_seconds``);
* overhead: embstab's whole ``train()`` call (model building, training, export; no evaluation)
  over the pipeline's training time: the target is at most 1.10;
* whether the two trained models have bit-identical parameters.

A third row, "embstab, gc as pykeen", runs ``train()`` without its :func:`gc.freeze` around the loop
(PyKEEN calls ``gc.collect()`` after every epoch, which walks the whole heap): it isolates what the
wrapper itself costs from what the freeze saves.

``--wordnet GRAPH`` adds one round on a WordNet k-core for the quality figures (both runners).
Both runners use the same torch thread count (``--threads``, default 1).

    python benchmarks/bench_kg.py [--graph umls] [--epochs 25] [--dim 64] [--repeats 5]
                                  [--wordnet wordnet_k3 --wordnet-epochs 50] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import sys
import statistics
import time

import torch


def run_pipeline(graph, model: str, dim: int, epochs: int, seed: int, lr: float, batch_size: int,
                 evaluate: bool = True):
    """pykeen.pipeline with embstab.kg.train's settings: (MRR, Hits@10, train seconds, model)."""
    from pykeen.pipeline import pipeline

    from embstab.kg._pykeen import quiet

    with quiet():
        res = pipeline(training=graph.triples_factory("train"), validation=graph.triples_factory("valid"),
                       testing=graph.triples_factory("test"), model=model, model_kwargs={"embedding_dim": dim},
                       optimizer="Adam", optimizer_kwargs={"lr": lr}, training_loop="sLCWA",
                       negative_sampler_kwargs={"num_negs_per_pos": 1},
                       training_kwargs={"num_epochs": epochs, "batch_size": batch_size, "use_tqdm": False,
                                        "pin_memory": False},
                       evaluation_kwargs={"batch_size": 256, "use_tqdm": False}, random_seed=seed)
    get = res.metric_results.get_metric
    return (float(get("both.realistic.inverse_harmonic_mean_rank")), float(get("both.realistic.hits_at_10")),
            float(res.train_seconds), res.model)


@contextlib.contextmanager
def gc_as_pykeen():
    """train() without its heap freeze: PyKEEN's per-epoch gc.collect walks the whole heap again."""
    import embstab.kg.training as training

    saved = training._frozen_heap
    training._frozen_heap = contextlib.nullcontext
    try:
        yield
    finally:
        training._frozen_heap = saved


def same_parameters(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def compare(graph, model: str, dim: int, epochs: int, seed: int, lr: float, batch_size: int, repeats: int,
            unfrozen: bool) -> list[str]:
    from embstab.kg import evaluate, train

    p_secs, e_loop, e_wall, u_loop, u_wall = [], [], [], [], []
    quality = {}
    same = True
    for rep in range(repeats):
        runners = ["pipeline", "embstab"] + (["unfrozen"] if unfrozen else [])
        if rep % 2:
            runners.reverse()
        for runner in runners:
            if runner == "pipeline":
                mrr, h10, sec, p_model = run_pipeline(graph, model, dim, epochs, seed, lr, batch_size)
                p_secs.append(sec)
                quality["pipeline"] = (mrr, h10)
                continue
            ctx = gc_as_pykeen() if runner == "unfrozen" else contextlib.nullcontext()
            with ctx:
                start = time.perf_counter()
                res = train(graph, model, dim, epochs, seed, lr=lr, batch_size=batch_size, progress=False,
                            evaluate_on=None, threads=None)
                wall = time.perf_counter() - start
            (e_loop if runner == "embstab" else u_loop).append(res.seconds)
            (e_wall if runner == "embstab" else u_wall).append(wall)
            if runner == "embstab":
                e_model = res.model
        same = same and same_parameters(p_model, e_model)
        if "embstab" not in quality:
            m = evaluate(e_model, graph, threads=None)
            quality["embstab"] = (m.mrr, m.hits_at_10)
    p = statistics.median(p_secs)
    rows = [f"{model:<9} {'pykeen.pipeline':<22} {quality['pipeline'][0]:7.4f} {quality['pipeline'][1]:8.4f} "
            f"{p / epochs:8.4f} {'1.000':>9} {'1.000':>9} {'':>6}",
            f"{model:<9} {'embstab.kg.train':<22} {quality['embstab'][0]:7.4f} {quality['embstab'][1]:8.4f} "
            f"{statistics.median(e_loop) / epochs:8.4f} {statistics.median(e_loop) / p:9.3f} "
            f"{statistics.median(e_wall) / p:9.3f} {str(same):>6}"]
    if unfrozen:
        rows.append(f"{model:<9} {'embstab, gc as pykeen':<22} {'':>7} {'':>8} {statistics.median(u_loop) / epochs:8.4f} "
                    f"{statistics.median(u_loop) / p:9.3f} {statistics.median(u_wall) / p:9.3f} {'':>6}")
    return rows


def timing_rounds(graph, args, show) -> None:
    """The alternating rounds of both runners on ``graph`` (the overhead table)."""
    show(f"{graph.name}: {graph.n_entities} entities, {graph.n_relations} relations, {len(graph.train)} training "
         f"triples; dim {args.dim}, {args.epochs} epochs, lr {args.lr}, batch {args.batch_size}, seed {args.seed}, "
         f"{args.repeats} alternating rounds (medians)")
    show(HEAD)
    show("-" * len(HEAD))
    for model in args.models:
        for row in compare(graph, model, args.dim, args.epochs, args.seed, args.lr, args.batch_size, args.repeats,
                           unfrozen=True):
            show(row)
    show("loop = training-loop time / pipeline's; overhead = whole train() call (build, train, export; no "
         "evaluation) / pipeline's training time; same = bit-identical parameters")


HEAD = (f"{'model':<9} {'runner':<22} {'MRR':>7} {'Hits@10':>8} {'s/epoch':>8} {'loop':>9} {'overhead':>9} "
        f"{'same':>6}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", default="umls")
    ap.add_argument("--models", nargs="+", default=["TransE", "DistMult"])
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=25)
    ap.add_argument("--repeats", type=int, default=5, help="rounds per model, alternating the order (median)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1, help="torch threads for both runners")
    ap.add_argument("--wordnet", metavar="GRAPH", help="also one round on this WordNet graph, e.g. wordnet_k3")
    ap.add_argument("--wordnet-dim", type=int, default=64)
    ap.add_argument("--wordnet-epochs", type=int, default=50)
    ap.add_argument("--wordnet-batch-size", type=int, default=512)
    ap.add_argument("--wordnet-only", action="store_true", help="skip the timing rounds on --graph")
    ap.add_argument("--out", help="also append the report to this file")
    args = ap.parse_args()

    from embstab.kg import load_graph, train

    torch.set_num_threads(args.threads)
    lines = [f"python benchmarks/bench_kg.py {' '.join(sys.argv[1:])}",
             f"{platform.machine()}, {os.cpu_count()} cores (shared), torch {torch.__version__}, "
             f"{args.threads} torch thread(s) for both runners, load average {os.getloadavg()[0]:.1f} at start", ""]

    def show(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    graph = load_graph(args.graph)
    # warm-up: the first call pays PyKEEN's imports and class registration; time neither runner with it
    train(graph, "TransE", 8, 1, 0, progress=False, evaluate_on=None, threads=None)
    run_pipeline(graph, "TransE", 8, 1, 0, args.lr, args.batch_size)
    if not args.wordnet_only:
        timing_rounds(graph, args, show)
    if args.wordnet:
        start = time.perf_counter()
        wn = load_graph(args.wordnet)
        show("")
        show(f"{wn.name}: {wn.n_entities} entities, {wn.n_relations} relations, {len(wn.train)}/{len(wn.valid)}/"
             f"{len(wn.test)} triples (built in {time.perf_counter() - start:.1f} s); dim {args.wordnet_dim}, "
             f"{args.wordnet_epochs} epochs, lr {args.lr}, batch {args.wordnet_batch_size}, one round")
        show(HEAD)
        show("-" * len(HEAD))
        for model in args.models:
            for row in compare(wn, model, args.wordnet_dim, args.wordnet_epochs, args.seed, args.lr,
                               args.wordnet_batch_size, 1, unfrozen=False):
                show(row)
    if args.out:
        with open(args.out, "a") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
