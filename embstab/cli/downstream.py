"""``embstab downstream OLD NEW --task ... --model ...``: how many downstream predictions flip.

Word-embedding tasks train a task model on each embedding; knowledge-graph tasks
(``link_prediction:GRAPH``, ``triple_classification:GRAPH``) score two saved KG models directly;
contextual models on a retrieval task search with their sentence vectors. Which of them runs is
the library's choice (:func:`embstab.downstream.pair_disagreement`); this module parses and prints.
:func:`run_kg` is the same call for ``embstab kg downstream``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from embstab.cli.contextual import STORE_PRECISIONS
from embstab.cli.names import DOWNSTREAM_MODELS, DOWNSTREAM_TASKS, KG_TASKS, TRAINING_RECIPES
from embstab.cli.options import (add_progress, add_trust_pickle, bits, learning_rate, positive_int, seed,
                                 show_progress, unit_fraction)
from embstab.downstream.catalog import SEARCH_INDEXES

__all__ = ["task_spec", "register", "run", "run_kg"]

HELP = "train a task model on each of two embeddings and count the predictions that differ"
DESCRIPTION = """\
Downstream instability of a pair of embeddings: the same model (same seed, data and settings) is
trained on OLD and on NEW, and the percentage of test predictions that differ is reported together
with each model's quality (accuracy, or per-token accuracy for tagging).

Tasks (real data, offline once fetched): rt_sentiment, rt_subjectivity, bbc_topic (classification:
models linear, mlp, cnn, lstm) and brown_pos (tagging: models bilstm, bilstm_crf). The linear model
(mean of the word vectors into one linear layer) is the reference and the fastest.

Retrieval tasks train nothing: wiki_retrieval (each Wikipedia vital article's title finds its
summary) and bbc_retrieval (each BBC News headline finds its article). Each text is the mean of its
known words' vectors, model search ranks the documents by exact cosine similarity (ties by document
index), and the disagreement is the share of queries whose top-k set of documents changes (--k,
default 10), printed beside the mean top-k overlap, each side's recall@k and MRR and a random
ranking's (recall@k = k/N). --index runs the search through a faiss index (pip install faiss-cpu):
flat (exhaustive, float32), hnsw and ivf (approximate) or binary (Hamming search of the sign bits);
the flips such an index adds on its own (its top k against exact search on OLD's vectors) are
printed beside the pair's.

OLD and NEW are embedding files (any format embstab loads) or builtin:NAME pretrained embeddings,
the old one first.

--seed-baseline trains two models on OLD alone with seeds S and S+1000: the disagreement that seeds
alone cause, to read a pair's number against.

The small tasks (rt_subjectivity, bbc_topic: about 2,200 texts each) are evaluated 5-fold, so that
every text is a test text once and the disagreement rests on all of them rather than on a 10 % test
split of about 220 (--folds 1: the fixed 80/10/10 split; --folds K: K folds for any task). Each
disagreement is printed with its 95 % interval over the test items (exact binomial): how far it
could move on another draw of as many test items. The chance level is the quality of the best
prediction that ignores the input (the most frequent test label; for tagging, the most frequent
training tag on every token).

An embedding that knows less than --min-coverage of the task's tokens (default 50%) is refused:
most inputs would be random vectors, and "0% of predictions differ" would mean nothing.

Knowledge-graph tasks: with --task link_prediction:GRAPH (or triple_classification:GRAPH), OLD and
NEW are model folders written by `embstab kg train` for GRAPH or a version of it (same entities and
relations). Link prediction reports the share of filtered top-1 answers (head and tail queries of
each test triple) that differ, the top-10 overlap and both models' MRR/Hits@10; triple
classification the share of test decisions that differ (--seed: seed of the negatives). --bits N
quantizes both models first with OLD's clips (the pair protocol) and reports their memory.

examples:
  embstab downstream old.txt new.txt --task rt_sentiment --model linear
  embstab downstream old.txt new.txt --task brown_pos --model bilstm --limit 2000
  embstab downstream old.txt --seed-baseline --task bbc_topic
  embstab downstream builtin:glove-6b-50d glove4.npz --task wiki_retrieval --k 10
  embstab downstream builtin:glove-6b-50d glove4.npz --task wiki_retrieval --index hnsw
  embstab downstream umls_old umls_new --task link_prediction:umls
  embstab downstream umls_old umls_new --task triple_classification:umls --bits 4"""

def task_spec(text: str) -> str:
    """argparse type: a word-embedding task name, or ``link_prediction:GRAPH`` / ``triple_classification:GRAPH``.

    Parameters
    ----------
    text : str
        The ``--task`` value.

    Returns
    -------
    str
        ``text``, checked (the graph name itself is checked when the graph loads).
    """
    kind, colon, graph = text.partition(":")
    kg_forms = ", ".join(f"{k}:GRAPH" for k in KG_TASKS)
    if colon:
        if kind not in KG_TASKS:
            raise argparse.ArgumentTypeError(f"unknown knowledge-graph task {kind!r} in {text!r}: use {kg_forms}")
        if not graph.strip():
            raise argparse.ArgumentTypeError(f"{text!r} names no graph: use {kind}:GRAPH, e.g. {kind}:umls")
        return text
    if text in KG_TASKS:
        raise argparse.ArgumentTypeError(f"{text!r} needs the graph the models embed: {text}:GRAPH, e.g. {text}:umls")
    if text not in DOWNSTREAM_TASKS:
        raise argparse.ArgumentTypeError(f"unknown task {text!r}: choose one of {', '.join(DOWNSTREAM_TASKS)}, "
                                         f"or {kg_forms}")
    return text


def register(subparsers) -> None:
    """Add the ``downstream`` sub-command to ``subparsers``.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The sub-parsers of the ``embstab`` parser.
    """
    p = subparsers.add_parser("downstream", help=HELP, description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old", metavar="OLD", help="the old embedding (file or builtin:NAME), or the old KG model's folder")
    p.add_argument("new", metavar="NEW", nargs="?",
                   help="the new embedding or KG model folder (omit with --seed-baseline)")
    p.add_argument("--task", type=task_spec, default="rt_sentiment", metavar="TASK",
                   help=f"{', '.join(DOWNSTREAM_TASKS)} (default rt_sentiment), or link_prediction:GRAPH, "
                        "triple_classification:GRAPH for two KG model folders")
    p.add_argument("--model", choices=list(DOWNSTREAM_MODELS),
                   help="model (default: linear, bilstm for tagging, search for retrieval)")
    p.add_argument("--k", type=positive_int, metavar="K",
                   help="retrieval tasks: documents returned per query, whose set a flip changes (default 10)")
    p.add_argument("--index", choices=list(SEARCH_INDEXES),
                   help="retrieval tasks: where the search runs: exact (default), or the faiss index flat, hnsw, "
                        "ivf or binary (needs faiss-cpu)")
    p.add_argument("--precision", choices=STORE_PRECISIONS,
                   help="retrieval tasks: how both members' vectors are stored and searched (default float32; a word "
                        "embedding: float32 or binary; int8/uint8 need contextual models)")
    p.add_argument("--new-precision", choices=STORE_PRECISIONS,
                   help="retrieval tasks with contextual models: NEW's precision, when it differs from --precision "
                        "(OLD and NEW the same model: how many results change when the store keeps those codes)")
    p.add_argument("--seed", type=seed, default=None,
                   help="model seed for both models; KG triple classification: seed of the negatives (default 0)")
    p.add_argument("--seed-baseline", action="store_true", help="compare seeds S and S+1000 on OLD only")
    p.add_argument("--limit", type=positive_int,
                   help="use at most N examples (tagging: sentences; retrieval: query-document pairs)")
    p.add_argument("--folds", type=positive_int, metavar="K",
                   help="evaluate K-fold, every item a test item once (1: the fixed 80/10/10 split; default 5 for "
                        "rt_subjectivity and bbc_topic, 1 for the others)")
    p.add_argument("--epochs", type=positive_int, help="maximum epochs (default per model)")
    p.add_argument("--lr", type=learning_rate, help="Adam learning rate, 1e-8 to 10 (default per model)")
    p.add_argument("--batch-size", type=positive_int,
                   help="mini-batch size (default 32; KG link prediction and retrieval: queries scored at once, "
                        "default 256)")
    p.add_argument("--recipe", choices=list(TRAINING_RECIPES), default=None,
                   help="precision recipe of the task model's weights while it trains, e.g. bf16-kahan "
                        "(default fp32)")
    p.add_argument("--bits", type=bits, help="KG tasks: quantize both models to this many bits first, with OLD's clips")
    p.add_argument("--output", choices=["table", "json"], default="table", help="print a table (default) or JSON")
    add_progress(p)
    p.add_argument("--min-coverage", type=unit_fraction, default=None, metavar="F",
                   help="refuse an embedding that knows less than this fraction of the task's tokens "
                        "(default 0.5; 0 = never refuse)")
    add_trust_pickle(p)
    p.set_defaults(func=run)


#: The options ``embstab downstream`` passes to :func:`embstab.downstream.pair_disagreement` (its
#: dests); each is named in messages by its flag.
_OPTIONS = ("model", "seed", "seed_baseline", "limit", "epochs", "lr", "batch_size", "recipe", "folds", "k", "index",
            "precision", "new_precision", "min_coverage", "bits", "trust_pickle")
_FLAGS = {name: "--" + name.replace("_", "-") for name in ("task", *_OPTIONS)}


def run(args: argparse.Namespace) -> int:
    """Handler of ``embstab downstream``: the disagreement of OLD and NEW (or OLD's seed baseline) on
    ``--task`` from :func:`embstab.downstream.pair_disagreement`; prints a table or JSON.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``downstream``.

    Returns
    -------
    int
        The exit code, 0.

    Raises
    ------
    EmbstabError
        If an option does not apply to the task or to OLD and NEW (``--bits`` to a word task,
        ``--model`` to a KG task, ``--k`` to a trained task...), a KG model folder is given to a
        word task, OLD/NEW and ``--seed-baseline`` do not match, or loading or training fails on
        bad input.
    """
    from embstab.downstream import pair_disagreement

    res = pair_disagreement(args.old, args.new, args.task, progress=show_progress(args), option_names=_FLAGS,
                            **{name: getattr(args, name) for name in _OPTIONS})
    if args.output == "json":
        _print_json(res)
    elif ":" in args.task:
        _print_kg(res, args.task.partition(":")[0])
    else:
        _print_word(res, args.task)
    return 0


def _print_json(res) -> None:
    json.dump(res.to_dict(), sys.stdout, indent=2, default=float)
    print()


def _print_word(res, task: str) -> None:
    """The table of a word-embedding task (or of a retrieval task, :func:`_print_retrieval`)."""
    from embstab.downstream import TASKS

    if TASKS[task][0] == "retrieval":
        _print_retrieval(res)
        return
    s = res.settings
    tagging = TASKS[task][0] == "tagging"
    unit = "test tokens" if tagging else "test examples"
    folds = int(s.get("folds", 1))
    how = f"{folds}-fold: every item tested once" if folds > 1 else "the fixed 80/10/10 split"
    print(f"task {res.task}, model {res.model}, seeds {res.seed}/{s['seed_b']}, {res.n_test} {unit} ({how})"
          + (f", recipe {s['recipe']}" if s.get("recipe", "fp32") != "fp32" else ""))
    print(f"disagreement: {res.disagreement:.2f}% of predictions differ   "
          + _interval_text(res.disagreement_interval, s.get("interval_level", 0.95), unit))
    chance = s.get("chance")
    print(f"quality old: {res.quality_old:.2f}%   quality new: {res.quality_new:.2f}%"
          + (f"   (chance: {chance:.2f}%, "
             f"{'the most frequent training tag on every token' if tagging else 'the majority class of the test items'})"
             if chance is not None else ""))
    _warn_near_chance(res.quality_old, res.quality_new, s.get("chance"))
    print(f"token coverage old: {s['token_coverage_old']:.1%}   new: {s['token_coverage_new']:.1%};  "
          f"vocabulary coverage old: {s['coverage_old']:.1%}   new: {s['coverage_new']:.1%};  "
          f"training time old: {s['seconds_old']:.1f} s   new: {s['seconds_new']:.1f} s")


def _print_retrieval(res) -> None:
    """The table of a retrieval task's disagreement: flips (and an index's own), overlap, both searches' recall@k
    and MRR, chance."""
    s = res.settings
    k = s["k"]
    index = s.get("index", "exact")
    how = {"exact": "exact cosine search", "flat": "faiss flat index", "binary": "faiss binary index",
           "hnsw": f"faiss HNSW index, M {s.get('hnsw_m')}, efSearch {s.get('ef_search')}",
           "ivf": f"faiss IVF index, nlist {s.get('nlist') or 'auto'}, nprobe {s.get('nprobe')}"}.get(index, index)
    print(f"task {res.task}, model {res.model} ({how}, {s['precision']}), {res.n_test} queries over "
          f"{s['n_documents']} documents, k = {k}")
    print(f"disagreement: {res.disagreement:.2f}% of queries' top-{k} sets differ   "
          + _interval_text(res.disagreement_interval, s.get("interval_level", 0.95), "queries")
          + f";  mean top-{k} overlap {s['overlap_at_k']:.3f}")
    if index != "exact":
        own = (s["index_disagreement_low"], s["index_disagreement_high"])
        print(f"the index by itself: {s['index_disagreement']:.2f}% of queries' top-{k} sets differ from exact search "
              "on OLD's vectors   " + _interval_text(own, s.get("interval_level", 0.95), "queries")
              + f";  recall@{k} against exact search {s['index_recall_at_k']:.3f}")
    mrr = "MRR" if s.get("mrr_depth") is None else f"MRR@{s['mrr_depth']}"
    print(f"recall@{k} old: {res.quality_old:.2f}%   new: {res.quality_new:.2f}%   "
          f"{mrr} old: {s['mrr_old']:.4f}   new: {s['mrr_new']:.4f}   "
          f"(random ranking: recall@{k} {s['chance']:.2f}%, MRR {s['chance_mrr']:.4f})")
    _warn_near_chance(res.quality_old, res.quality_new, s.get("chance"))
    ties = max(s["ties_at_k_old"], s["ties_at_k_new"])
    coverage = (f"token coverage old: {s['token_coverage_old']:.1%}   new: {s['token_coverage_new']:.1%};  "
                if "token_coverage_old" in s and "token_coverage_new" in s else "")
    print(coverage + f"search time old: {s['seconds_old']:.1f} s   new: {s['seconds_new']:.1f} s"
          + (f";  {ties} queries with a tie at rank {k} (decided by "
             f"{'document index' if index == 'exact' else 'the index'})" if ties else ""))


def _interval_text(interval, level: float, unit: str) -> str:
    """``[low, high] (95% interval over the test examples)``, for a disagreement's line."""
    low, high = interval
    return f"[{low:.2f}, {high:.2f}] ({100 * level:g}% interval over the {unit})"


def _warn_near_chance(quality_old: float, quality_new: float, chance: float | None) -> None:
    """Say on stderr when a model is near its task's chance level: its disagreement is then mostly noise."""
    from embstab.selection.results import NEAR_CHANCE_MARGIN  # noqa: PLC0415

    if chance is None or not math.isfinite(chance):
        return
    near = [side for side, q in (("old", quality_old), ("new", quality_new)) if q <= chance + NEAR_CHANCE_MARGIN]
    if near:
        print(f"embstab downstream: warning: the {' and '.join(near)} model{'s score' if len(near) > 1 else ' scores'} "
              f"within {NEAR_CHANCE_MARGIN:g} points of chance ({chance:.2f}%): such predictions are mostly noise, so "
              "the disagreement says little about the embeddings; train longer (--epochs), try another --model (mlp, "
              "cnn), or check the token coverage: words the embedding lacks carry nothing",
              file=sys.stderr)


def run_kg(old: str, new: str, task: str, graph_name: str, *, bits: int | None = None, seed: int = 0,
           output: str = "table", batch_size: int = 256, progress: bool = False) -> int:
    """Disagreement of two saved KG models on ``graph_name``, through the one path of ``embstab downstream``
    (:func:`embstab.downstream.pair_disagreement` with ``TASK:GRAPH``); prints a table or JSON, returns 0.

    Parameters
    ----------
    old, new : str
        Model folders written by ``embstab kg train``, the old one first.
    task : {"link_prediction", "triple_classification"}
        The downstream task.
    graph_name : str
        A graph name or folder (:func:`embstab.kg.load_graph`) both models embed.
    bits : int, optional
        Quantize both models first (pair protocol: the old model's clips for both).
    seed : int
        Seed of the triple-classification negatives.
    output : {"table", "json"}
        Output format.
    batch_size : int
        Link-prediction queries scored at once.
    progress : bool
        Show a progress bar.

    Returns
    -------
    int
        The exit code, 0.
    """
    from embstab.downstream import pair_disagreement

    res = pair_disagreement(old, new, f"{task}:{graph_name}", seed=seed, bits=bits, batch_size=batch_size,
                            progress=progress, option_names=_FLAGS)
    if output == "json":
        _print_json(res)
    else:
        _print_kg(res, task)
    return 0


def _print_kg(res, task: str) -> None:
    """The table of a KG task: flips, both models' metrics, chance, and memory when quantized."""
    s = res.settings
    bits = s.get("bits")
    bits_note = f", quantized to {bits} bits" if bits is not None else ""
    if task == "link_prediction":
        print(f"graph {res.graph}, {res.n_queries} test queries{bits_note}")
        print(f"disagreement: {res.disagreement:.2f}% of filtered top-1 answers differ   "
              + _interval_text(res.disagreement_interval, s.get("interval_level", 0.95), "test queries")
              + f";  top-{res.k} overlap {res.top_k_overlap:.3f}")
        for tag, m in (("old", res.metrics_old), ("new", res.metrics_new)):
            print(f"model {tag}: MRR {m.mrr:.4f}  Hits@1 {m.hits_at_1:.4f}  Hits@10 {m.hits_at_10:.4f}")
        chance = s.get("chance_mrr")
        if chance is not None:  # what a model that learned nothing scores on these filtered queries
            print(f"random ranking: MRR {chance:.4f}")
    else:
        print(f"graph {res.graph}, {res.n_test} test decisions{bits_note}")
        print(f"disagreement: {res.disagreement:.2f}% of decisions differ   "
              + _interval_text(res.disagreement_interval, s.get("interval_level", 0.95), "test decisions"))
        pos, neg = s["n_positives"], s["n_negatives"]
        print(f"accuracy old: {res.accuracy_old:.2f}%   accuracy new: {res.accuracy_new:.2f}%   (majority class: "
              f"{100.0 * max(pos, neg) / (pos + neg):.2f}%: {pos} true and {neg} corrupted test triples)")
    if bits is not None:
        print(f"memory old: {s['memory_bits_old'] / 8192:.1f} KiB   new: {s['memory_bits_new'] / 8192:.1f} KiB   "
              f"({s['compression_ratio']:.1f}x smaller than float32)")
