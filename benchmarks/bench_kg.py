"""embstab.kg.train vs PyKEEN's own pipeline() on UMLS: same settings, same run, same machine.

Prints filtered test MRR / Hits@10 of each, training seconds per epoch, and the overhead ratio
(embstab's whole train() call, export and all but evaluation, over the pipeline's training time).

    python benchmarks/bench_kg.py [--graph umls] [--epochs 25] [--dim 64] [--models TransE DistMult]
"""

from __future__ import annotations

import argparse
import time

import torch


def run_pipeline(graph, model: str, dim: int, epochs: int, seed: int, lr: float, batch_size: int):
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", default="umls")
    ap.add_argument("--models", nargs="+", default=["TransE", "DistMult"])
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=25)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--batch-size", type=int, default=256)
    args = ap.parse_args()

    from embstab.kg import evaluate, load_graph, train

    graph = load_graph(args.graph)
    print(f"graph {graph.name}: {graph.n_entities} entities, {graph.n_relations} relations, "
          f"{len(graph.train)} training triples; dim {args.dim}, {args.epochs} epochs, lr {args.lr}, "
          f"batch {args.batch_size}, seed {args.seed}, torch threads {torch.get_num_threads()}")
    # warm-up: the first call pays PyKEEN's imports and class registration; time neither runner with it
    train(graph, "TransE", 8, 1, 0, progress=False, evaluate_on=None)
    run_pipeline(graph, "TransE", 8, 1, 0, args.lr, args.batch_size)
    head = f"{'model':<9} {'runner':<16} {'MRR':>7} {'Hits@10':>8} {'s/epoch':>8} {'overhead':>9} {'same params':>12}"
    rows = [head, "-" * len(head)]
    for model in args.models:
        p_mrr, p_h10, p_sec, p_model = run_pipeline(graph, model, args.dim, args.epochs, args.seed, args.lr,
                                                    args.batch_size)
        start = time.perf_counter()
        res = train(graph, model, args.dim, args.epochs, args.seed, lr=args.lr, batch_size=args.batch_size,
                    progress=False, evaluate_on=None)
        wall = time.perf_counter() - start
        m = evaluate(res.model, graph)
        same = all(torch.equal(x, y) for x, y in zip(p_model.state_dict().values(), res.model.state_dict().values()))
        rows.append(f"{model:<9} {'pykeen.pipeline':<16} {p_mrr:7.4f} {p_h10:8.4f} {p_sec / args.epochs:8.4f} "
                    f"{'1.000':>9} {'':>12}")
        rows.append(f"{model:<9} {'embstab.kg.train':<16} {m.mrr:7.4f} {m.hits_at_10:8.4f} "
                    f"{res.seconds_per_epoch:8.4f} {wall / p_sec:9.3f} {str(same):>12}")
    print("\n".join(rows))
    print("overhead = embstab train() wall time (training + export, no evaluation) / pipeline training time")


if __name__ == "__main__":
    main()
