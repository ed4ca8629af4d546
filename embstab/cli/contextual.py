"""``embstab contextual pretrain|features|disagreement|download``: contextual (BERT) models as embedding pairs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from embstab.cli.options import (
    add_progress,
    add_threads,
    learning_rate,
    positive_int,
    seed,
    show_progress,
    threads_or_all,
    unit_fraction,
)
from embstab.errors import EmbstabError

#: The retrieval tasks of embstab.downstream (kept here as names: the CLI starts without importing them).
RETRIEVAL_TASKS = ("wiki_retrieval", "bbc_retrieval")
#: Vector-store precisions (embstab.compress.vectorstore.PRECISIONS).
STORE_PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")

__all__ = ["register", "run_disagreement", "run_download", "run_features", "run_pretrain"]

HELP = "pretrain BERT pairs, extract word-type embeddings, measure frozen-feature disagreement, download models"
DESCRIPTION = """\
Contextual embeddings as a kind of embstab pair. A small BERT is pretrained with masked-LM on two
versions of an offline corpus (each leaves out a different share of documents), with one
WordPiece tokenizer and the same seed, plus a seed-only baseline on version A; or the packaged
MiniLM-L6 (builtin:minilm_l6) is fine-tuned on both versions. Models are folders (config.json,
model.safetensors, tokenizer.json) that every command takes, as does builtin:minilm_l6, and
hub:ORG/NAME[@REVISION] once `embstab contextual download` has fetched it (no command downloads
a model by itself).

  pretrain      train the pair (and baseline) into OUT/a, OUT/b, OUT/baseline; print held-out
                MLM loss and perplexity, seconds per step
  features      word-type embedding of a model: per word, the mean of its contextual vectors over
                its occurrences in a corpus or text file; writes any format `embstab compare` reads
  disagreement  the same classifier (linear or mlp) trained on each model's frozen sentence
                features of a task, or the same tagger (bilstm) on each model's frozen per-word
                features of brown_pos; percent of test predictions (tags) that differ. On
                wiki_retrieval / bbc_retrieval each model's sentence vectors search the documents
                (stored at --precision: float32, int8, uint8, binary, ubinary, as
                sentence-transformers quantizes them; --new-precision for NEW alone): percent of
                queries whose top-k documents change, beside recall@k, MRR and bytes per vector
  download      fetch a BERT model (config.json, model.safetensors, tokenizer) from the Hugging
                Face hub or a mirror into the cache, where hub:ORG/NAME finds it; pickle weights
                (pytorch_model.bin) are refused"""

EPILOG = """\
examples:
  embstab contextual pretrain --corpus gensim_lee --size tiny --steps 200 --out runs/bert
  embstab contextual pretrain --corpus wiki_vital --base builtin:minilm_l6 --steps 100 --out runs/ft
  embstab contextual features runs/bert/a --corpus gensim_lee --out a.txt
  embstab contextual features runs/bert/b --corpus gensim_lee --out b.txt
  embstab compare a.txt b.txt --top-n 0                  # OLD NEW: version a, then b
  embstab contextual features builtin:minilm_l6 --text sentences.txt --layer 3 --out mini.npz
  embstab contextual disagreement runs/bert/a runs/bert/b --task rt_sentiment --classifier mlp
  embstab contextual disagreement builtin:minilm_l6 --quantize-new fp8_e4m3 --task bbc_topic
  embstab contextual disagreement runs/bert/a --seed-baseline --task rt_subjectivity
  embstab contextual disagreement runs/bert/a runs/bert/b --task brown_pos --limit 2000
  embstab contextual disagreement builtin:minilm_l6 builtin:minilm_l6 --task wiki_retrieval --new-precision binary
  embstab contextual disagreement builtin:minilm_l6 builtin:minilm_l6 --task wiki_retrieval --new-precision binary --rescore 4
  embstab contextual disagreement runs/ft/a runs/ft/b --task wiki_retrieval --precision int8 --k 10
  embstab contextual download sentence-transformers/all-MiniLM-L6-v2
  embstab contextual features hub:sentence-transformers/all-MiniLM-L6-v2 --corpus gensim_lee --out g.txt"""

DOWNLOAD_EPILOG = """\
examples:
  embstab contextual download sentence-transformers/all-MiniLM-L6-v2
  embstab contextual download google-bert/bert-base-uncased
  embstab contextual download org/name --revision v1.0         # then use hub:org/name@v1.0
  embstab contextual download org/name --endpoint https://hf-mirror.example.org
  embstab contextual download org/name --dest models/name      # then use the folder models/name
  HF_TOKEN=... embstab contextual download org/private-model

The model lands in the cache (embstab data's folder, $EMBSTAB_DATA or ~/.cache/embstab) under
hub/ORG--NAME/REVISION, unless --dest is given. Only top-level config.json, safetensors weights,
tokenizer.json / vocab.txt, tokenizer_config.json and special_tokens_map.json are fetched; a
repository whose weights are only pickle files (pytorch_model.bin) is refused, since reading
pickle can run code. A finished download is not fetched again unless --force."""


#: What each action does, for its own --help (the group's --help tells the whole story).
ACTIONS = {
    "pretrain": "Train the pair of models (and the seed-only baseline) into OUT/a, OUT/b, OUT/baseline: the same "
                "WordPiece tokenizer and seed on two versions of a corpus, or builtin:minilm_l6 fine-tuned on "
                "both; prints the held-out MLM loss and perplexity and the seconds per step.",
    "features": "Word-type embedding of a model: per word, the mean of its contextual vectors over its occurrences "
                "in a corpus or text file; writes any format `embstab compare` reads.",
    "disagreement": "The same classifier (linear or mlp) trained on each model's frozen sentence features of a task, "
                    "or the same tagger (bilstm) on each model's frozen per-word features of brown_pos; prints the "
                    "percent of test predictions (tags) that differ, beside each model's quality. On a retrieval "
                    "task each model's sentence vectors, stored at a vector-store precision, search the documents: "
                    "prints the percent of queries whose top-k set changes, recall@k, MRR and bytes per vector.",
}


def _action_help(action: str) -> dict:
    """``description`` and ``epilog`` (its own examples) of one action's parser."""
    mine = [line for line in EPILOG.splitlines()[1:] if f"contextual {action} " in line]
    return {"description": ACTIONS[action] + " See `embstab contextual --help` for the models a command takes.",
            "epilog": "examples:\n" + "\n".join(mine), "formatter_class": argparse.RawDescriptionHelpFormatter}


def register(subparsers) -> None:
    """Add the ``contextual`` sub-command to ``subparsers``.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The sub-parsers of the ``embstab`` parser.
    """
    p = subparsers.add_parser("contextual", help=HELP, description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="contextual_command", metavar="ACTION")

    pre = sub.add_parser("pretrain", help="pretrain (or fine-tune) a model on each of two corpus versions",
                         **_action_help("pretrain"))
    pre.add_argument("--corpus", default="gensim_lee", help="offline corpus (default gensim_lee)")
    pre.add_argument("--size", default="tiny", help="model size: tiny, small, minilm (default tiny)")
    pre.add_argument("--base", metavar="MODEL", help="fine-tune this model (folder or builtin:minilm_l6) instead")
    pre.add_argument("--steps", type=positive_int, default=200, help="training steps per model (default 200)")
    pre.add_argument("--seed", type=seed, default=0, help="seed of A and B (default 0)")
    pre.add_argument("--baseline-seed", type=seed, help="seed of the baseline (default seed + 1)")
    pre.add_argument("--no-baseline", action="store_true", help="skip the seed-only baseline model")
    pre.add_argument("--fraction", type=unit_fraction, default=0.05, help="share of documents each version leaves out")
    pre.add_argument("--pair-seed", type=seed, default=0, help="seed choosing the left-out documents")
    pre.add_argument("--vocab-size", type=positive_int, default=8000, help="WordPiece vocabulary size (default 8000)")
    pre.add_argument("--max-length", type=positive_int, default=128, help="position limit in pieces (default 128)")
    pre.add_argument("--batch-size", type=positive_int, default=32)
    pre.add_argument("--lr", type=learning_rate, default=5e-4,
                     help="peak AdamW learning rate, 1e-8 to 10 (default 5e-4)")
    add_threads(pre)
    pre.add_argument("-o", "--out", required=True, help="output folder (gets a/, b/, baseline/, pretrain.json)")
    add_progress(pre)
    pre.set_defaults(func=run_pretrain)

    fe = sub.add_parser("features", help="word-type embedding of a model over a corpus or text file",
                        **_action_help("features"))
    fe.add_argument("model", metavar="MODEL", help="model folder, builtin:minilm_l6 or hub:ORG/NAME")
    src = fe.add_mutually_exclusive_group(required=True)
    src.add_argument("--corpus", help="offline corpus to average over")
    src.add_argument("--text", metavar="FILE", help="text file, one text per line (no empty lines)")
    fe.add_argument("--max-docs", type=positive_int, help="use the first N documents of the corpus")
    fe.add_argument("--layer", type=int, default=-1, help="hidden state: 0 = input embeddings, -1 = last (default)")
    fe.add_argument("--subword", choices=["first", "mean"], default="first", help="piece(s) standing for a word")
    fe.add_argument("--min-count", type=positive_int, default=1, help="keep words seen at least N times")
    fe.add_argument("--max-occurrences", type=positive_int, help="average over at most N occurrences per word")
    fe.add_argument("--batch-size", type=positive_int, default=32)
    add_threads(fe)
    fe.add_argument("-o", "--out", required=True, help="embedding file (format from the suffix: .txt, .npz, ...)")
    add_progress(fe)
    fe.set_defaults(func=run_features)

    dis = sub.add_parser("disagreement", help="frozen-feature downstream disagreement of two models",
                         **_action_help("disagreement"))
    dis.add_argument("old", metavar="OLD", help="the old model (folder, builtin:minilm_l6 or hub:ORG/NAME)")
    dis.add_argument("new", metavar="NEW", nargs="?",
                     help="the new model (omit with --seed-baseline or --quantize-new)")
    dis.add_argument("--quantize-new", metavar="FORMAT", help="NEW = OLD with weights rounded to this lowprec format")
    dis.add_argument("--seed-baseline", action="store_true", help="OLD against OLD, classifier seeds S and S+1000")
    dis.add_argument("--task", choices=["rt_sentiment", "rt_subjectivity", "bbc_topic", "brown_pos", *RETRIEVAL_TASKS],
                     default="rt_sentiment", help="classification task, brown_pos tagging on per-word features, or a "
                                                  "retrieval task (known-item search with the sentence vectors)")
    dis.add_argument("--classifier", choices=["linear", "mlp", "bilstm", "bilstm_crf"],
                     help="task model: linear (default) or mlp for classification, bilstm (default) or bilstm_crf "
                          "for brown_pos")
    dis.add_argument("--seed", type=seed, default=0, help="classifier seed (default 0)")
    dis.add_argument("--limit", type=positive_int, help="use at most N examples (retrieval: query-document pairs)")
    dis.add_argument("--epochs", type=positive_int, help="maximum epochs (default per classifier)")
    dis.add_argument("--lr", type=learning_rate, help="Adam learning rate, 1e-8 to 10 (default per classifier)")
    dis.add_argument("--layer", type=int, default=-1, help="hidden state to pool (default -1, the last)")
    dis.add_argument("--pooling", choices=["mean", "cls"],
                     help="sentence features (default mean; retrieval: the model's own pipeline)")
    dis.add_argument("--subword", choices=["first", "mean"], default="first",
                     help="brown_pos: a word's vector is its first piece's (default) or its pieces' mean")
    dis.add_argument("--batch-size", type=positive_int, default=32, help="extraction batch size")
    ret = dis.add_argument_group("retrieval tasks (wiki_retrieval, bbc_retrieval)")
    ret.add_argument("--k", type=positive_int, help="documents returned per query, whose set a flip changes (default 10)")
    ret.add_argument("--precision", choices=STORE_PRECISIONS,
                     help="how both models' document and query vectors are stored (default float32); int8/uint8 "
                          "buckets are calibrated on the documents, binary codes searched by Hamming distance")
    ret.add_argument("--new-precision", choices=STORE_PRECISIONS, help="NEW's precision, when it differs")
    ret.add_argument("--truncate-dim", type=positive_int, metavar="D",
                     help="keep the leading D dimensions of both models' vectors (Matryoshka), renormalised")
    ret.add_argument("--rescore", type=_multiplier, metavar="M",
                     help="binary members: re-rank the k x M nearest codes with the float query")
    add_threads(dis)
    dis.add_argument("--output", choices=["table", "json"], default="table")
    add_progress(dis)
    dis.set_defaults(func=run_disagreement)

    dl = sub.add_parser("download", help="download a BERT model from the Hugging Face hub (or a mirror) into the cache",
                        description="Download a BERT model (safetensors only) from the Hugging Face hub or a mirror "
                                    "into embstab's cache, where hub:ORG/NAME[@REVISION] names it.",
                        epilog=DOWNLOAD_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    dl.add_argument("repo_id", metavar="REPO_ID", help="repository on the hub, ORG/NAME")
    dl.add_argument("--revision", default="main", help="branch, tag or commit (default main)")
    dl.add_argument("--endpoint", metavar="URL", help="hub address (default $HF_ENDPOINT or https://huggingface.co)")
    dl.add_argument("--dest", metavar="DIR", help="download into this folder instead of the cache")
    dl.add_argument("--force", action="store_true", help="download again even if a finished copy exists")
    add_progress(dl)
    dl.set_defaults(func=run_download)
    p.set_defaults(func=lambda args: p.print_help() or 2)


def _multiplier(text: str) -> float:
    """argparse type of --rescore: a finite number >= 1."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {text!r}") from None
    if not (math.isfinite(value) and value >= 1):
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {text!r}")
    return value


def _model_folder(spec: str | None) -> str | None:
    """The folder a model argument reads, for the input/output guard (None for a packaged model).

    A ``hub:`` name reads its copy in the cache, which an output must not land in either; a
    malformed hub name is left for the loader to report.
    """
    if spec is None or spec.startswith("builtin:"):
        return None
    if spec.startswith("hub:"):
        from embstab.contextual.errors import HubNameError
        from embstab.contextual.hub import hub_dir, parse_hub_name

        try:
            return str(hub_dir(parse_hub_name(spec)))
        except HubNameError:
            return None
    return spec


def _model(spec: str):
    from embstab.contextual import load_model

    if not spec.startswith(("builtin:", "hub:")) and not Path(spec).exists() and ("/" in spec or spec.startswith(".")):
        raise EmbstabError(f"model folder {spec} does not exist")
    return load_model(spec)


def run_pretrain(args: argparse.Namespace) -> int:
    """Handler of ``embstab contextual pretrain``: pretrain (or fine-tune) models on two versions of a
    corpus (and a seed-only baseline), save them under ``--out`` with ``pretrain.json`` and print their
    held-out loss.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``contextual pretrain``.

    Returns
    -------
    int
        The exit code, 0.

    Raises
    ------
    EmbstabError
        If the model size is unknown, the ``--base`` folder does not exist or holds a device or pipe,
        or ``--out`` is a file, the base folder, a folder holding it or a folder inside it.
    """
    from embstab._fs import atomic_write, check_inputs, check_outputs, check_writable
    from embstab.contextual import SIZES, pretrain_pair
    from embstab.data import load_corpus
    from embstab.errors import lookup

    if args.base is None:
        lookup(SIZES, args.size, "model size")
    # before loading anything: --out must not be, hold or lie inside the base model's folder
    inputs = [("--base", _model_folder(args.base))]
    check_inputs(inputs)
    check_outputs([("--out", args.out)], inputs)
    check_writable(args.out, "--out", folder=True)
    base = _model(args.base) if args.base else None
    out = Path(args.out)
    pair = pretrain_pair(load_corpus(args.corpus), args.size, args.steps, args.seed, baseline_seed=args.baseline_seed,
                         base=base, fraction=args.fraction, pair_seed=args.pair_seed, vocab_size=args.vocab_size,
                         max_length=args.max_length, baseline=not args.no_baseline, progress=show_progress(args),
                         batch_size=args.batch_size, lr=args.lr,
                         threads=threads_or_all(args.threads, hint=show_progress(args)))
    rows = {}
    for label, res in pair.results().items():
        res.model.save(out / label)
        rows[label] = res.to_dict()
    with atomic_write(out / "pretrain.json", "w") as f:
        json.dump({"corpus": args.corpus, "pair": pair.settings, "models": rows}, f, indent=1, default=str)
    print(f"corpus {args.corpus}: versions of {pair.settings['documents_a']} and {pair.settings['documents_b']} "
          f"documents, {pair.settings['heldout_documents']} held out; {args.steps} steps each")
    for label, row in rows.items():
        print(f"{label:9s} {row['model']:28s} held-out loss {row['heldout_loss']:.3f} (perplexity "
              f"{row['heldout_perplexity']:.1f}, before {row['initial_heldout_loss']:.3f})  "
              f"{row['seconds_per_step'] * 1000:.0f} ms/step  -> {out / label}")
    return 0


def _read_lines(path: str) -> list[str]:
    from embstab._textfiles import split_lines
    from embstab.contextual import EmptyTextError

    lines = split_lines(Path(path).read_text(encoding="utf-8", errors="replace"))
    for i, line in enumerate(lines):
        if not line.strip():
            raise EmptyTextError(f"{path}, line {i + 1}: empty line (one text per line; remove empty lines)")
    if not lines:
        raise EmptyTextError(f"{path} holds no text")
    return lines


def run_features(args: argparse.Namespace) -> int:
    """Handler of ``embstab contextual features``: the word-type embedding of a model over a corpus or a
    text file, written to ``--out``.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``contextual features``.

    Returns
    -------
    int
        The exit code, 0.

    Raises
    ------
    EmbstabError
        If the model folder does not exist, the text file is empty, has an empty line or is a device
        or pipe, or ``--out`` would overwrite the text or a file of the model folder.
    """
    from embstab._fs import check_inputs, check_outputs, check_writable
    from embstab.contextual import word_type_embedding
    from embstab.data import load_corpus
    from embstab.io import save
    from embstab.io.arrays import vocab_path_for

    inputs = [("MODEL", _model_folder(args.model)), ("--text", args.text)]
    outputs = [("--out", args.out)]
    if args.out.lower().endswith(".npy"):  # a .npy matrix writes its words to X.vocab beside it
        outputs.append(("--out's vocabulary", vocab_path_for(args.out)))
    check_inputs(inputs)
    check_outputs(outputs, inputs)
    for label, out in outputs:
        check_writable(out, label)
    model = _model(args.model)
    docs = _read_lines(args.text) if args.text else load_corpus(args.corpus)
    if args.max_docs:
        docs = docs[:args.max_docs]
    emb = word_type_embedding(model, docs, layer=args.layer, subword=args.subword, min_count=args.min_count,
                              max_occurrences=args.max_occurrences, batch_size=args.batch_size,
                              threads=threads_or_all(args.threads, hint=show_progress(args)),
                              progress=show_progress(args))
    save(emb, args.out)
    print(f"{len(emb)} words x {emb.dim} (layer {emb.metadata['layer']}, {args.subword} piece"
          f"{'s' if args.subword == 'mean' else ''}, {int(emb.counts.sum())} occurrences) -> {args.out}",
          file=sys.stderr)  # stdout may be --out itself
    return 0


def run_disagreement(args: argparse.Namespace) -> int:
    """Handler of ``embstab contextual disagreement``: the same classifier (or tagger) trained on the
    frozen features of OLD and of NEW (a second model, OLD with quantized weights, or OLD again with
    another seed); prints a table or JSON.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``contextual disagreement``.

    Returns
    -------
    int
        The exit code, 0.

    Raises
    ------
    EmbstabError
        If not exactly one of NEW, ``--quantize-new`` and ``--seed-baseline`` is given, or a model folder
        does not exist or holds a device or pipe.
    """
    from embstab._fs import check_inputs
    from embstab.contextual import contextual_disagreement, quantize_weights

    given = sum(x is not None and x is not False for x in (args.new, args.quantize_new, args.seed_baseline or None))
    if given != 1:
        raise EmbstabError("give a new model NEW, or one of --quantize-new FORMAT / --seed-baseline")
    retrieval = args.task in RETRIEVAL_TASKS
    _check_task_options(args, retrieval)
    check_inputs([("OLD", _model_folder(args.old)), ("NEW", _model_folder(args.new))])
    a = _model(args.old)
    # the same model named twice is loaded (and its texts encoded) once
    b = (a if args.seed_baseline or args.new == args.old else quantize_weights(a, args.quantize_new)
         if args.quantize_new else _model(args.new))
    if retrieval:
        return _retrieval(args, a, b)
    kwargs = {k: v for k, v in (("epochs", args.epochs), ("lr", args.lr)) if v is not None}
    res = contextual_disagreement(a, b, args.task, args.classifier, args.seed,
                                  seed_b=args.seed + 1000 if args.seed_baseline else None, limit=args.limit,
                                  layer=args.layer, pooling=args.pooling or "mean", subword=args.subword,
                                  batch_size=args.batch_size,
                                  threads=threads_or_all(args.threads, hint=show_progress(args)),
                                  progress=show_progress(args), **kwargs)
    if args.output == "json":
        json.dump(res.to_dict(), sys.stdout, indent=2, default=float)
        print()
        return 0
    s = res.settings
    if args.task == "brown_pos":
        print(f"task {res.task}, tagger {res.model} on frozen layer {args.layer} word features ({args.subword} piece"
              f"{'s' if args.subword == 'mean' else ''}), seeds {res.seed}/{s['seed_b']}, {res.n_test} test tokens")
    else:
        print(f"task {res.task}, classifier {res.model} on frozen {args.pooling}-pooled layer {args.layer} features, "
              f"seeds {res.seed}/{s['seed_b']}, {res.n_test} test examples")
    print(f"old: {s['model_old']}   new: {s['model_new']}")
    print(f"disagreement: {res.disagreement:.2f}% of predictions differ")
    print(f"accuracy old: {res.quality_old:.2f}%   accuracy new: {res.quality_new:.2f}%"
          + (f"   (majority class: {s['majority_rate']:.2f}%)" if "majority_rate" in s else ""))
    return 0


def _check_task_options(args: argparse.Namespace, retrieval: bool) -> None:
    """Refuse the options of the other family of tasks (trained models vs. search), naming the flag."""
    if retrieval:
        for attr, flag in (("classifier", "--classifier"), ("epochs", "--epochs"), ("lr", "--lr")):
            if getattr(args, attr) is not None:
                raise EmbstabError(f"{flag} applies to trained tasks; {args.task} trains nothing (the sentence vectors "
                                   "rank the documents)")
        return
    for attr, flag in (("k", "--k"), ("precision", "--precision"), ("new_precision", "--new-precision"),
                       ("truncate_dim", "--truncate-dim"), ("rescore", "--rescore")):
        if getattr(args, attr) is not None:
            raise EmbstabError(f"{flag} applies to retrieval tasks ({', '.join(RETRIEVAL_TASKS)}), not to {args.task}")


def _retrieval(args: argparse.Namespace, a, b) -> int:
    """``contextual disagreement`` on a retrieval task: each model's sentence vectors, stored at their
    precision, search the documents; prints the flipped queries, recall@k, MRR and bytes per vector."""
    from embstab.contextual.retrieval import contextual_retrieval_disagreement

    res = contextual_retrieval_disagreement(
        a, b, args.task, layer=args.layer, pooling=args.pooling, batch_size=args.batch_size,
        threads=threads_or_all(args.threads, hint=show_progress(args)), progress=show_progress(args),
        precision=args.precision or "float32", new_precision=args.new_precision, truncate_dim=args.truncate_dim,
        rescore=args.rescore, k=10 if args.k is None else args.k, limit=args.limit)
    if args.output == "json":
        json.dump(res.to_dict(), sys.stdout, indent=2, default=float)
        print()
        return 0
    s = res.settings
    k, level = s["k"], s.get("interval_level", 0.95)
    low, high = res.disagreement_interval
    print(f"task {res.task}, exact search of layer {args.layer} sentence vectors, {res.n_test} queries over "
          f"{s['n_documents']} documents, k = {k}"
          + (f", truncated to {s['truncate_dim']} dims" if s.get("truncate_dim") else ""))
    for label in ("old", "new"):
        how = s[f"precision_{label}"] + (f", rescored x{s['rescore']:g}" if s[f"mrr_depth_{label}"] else "")
        print(f"{label}: {s[f'model_{label}']} ({how}, {s[f'dim_{label}']} dims, "
              f"{s[f'bytes_per_vector_{label}']} bytes per vector)")
    print(f"disagreement: {res.disagreement:.2f}% of queries' top-{k} sets differ   [{low:.2f}, {high:.2f}] "
          f"{level:.0%} interval over the queries;  mean top-{k} overlap {s['overlap_at_k']:.3f}")
    mrr = lambda label: ("MRR" if s[f"mrr_depth_{label}"] is None
                         else f"MRR@{s[f'mrr_depth_{label}']}")
    print(f"recall@{k} old: {res.quality_old:.2f}%   new: {res.quality_new:.2f}%   {mrr('old')} old: "
          f"{s['mrr_old']:.4f}   {mrr('new')} new: {s['mrr_new']:.4f}   (random ranking: recall@{k} "
          f"{s['chance']:.2f}%, MRR {s['chance_mrr']:.4f})")
    ties = max(s["ties_at_k_old"], s["ties_at_k_new"])
    print(f"search time old: {s['seconds_old']:.1f} s   new: {s['seconds_new']:.1f} s"
          + (f";  {ties} queries with a tie at rank {k} (decided by document index)" if ties else ""))
    return 0


def run_download(args: argparse.Namespace) -> int:
    """Handler of ``embstab contextual download``: fetch a BERT model from a hub into the cache (or
    ``--dest``) and print where it is and the name that loads it.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``contextual download``.

    Returns
    -------
    int
        The exit code, 0.

    Raises
    ------
    EmbstabError
        If the repository id is malformed, the hub cannot be reached or downloads are switched off,
        the repository does not exist, or it holds no loadable safetensors BERT; or ``--dest`` exists
        and is not a folder.
    """
    from embstab._fs import check_writable
    from embstab.contextual import download_model

    if args.dest is not None:
        check_writable(args.dest, "--dest", folder=True)  # before the first request

    folder = download_model(args.repo_id, args.revision, dest=args.dest, endpoint=args.endpoint, force=args.force,
                            progress=show_progress(args))
    record = json.loads((folder / "embstab.json").read_text(encoding="utf-8"))["metadata"]
    size = sum((folder / f).stat().st_size for f in record["files"])
    label = args.repo_id if args.revision == "main" else f"{args.repo_id}@{args.revision}"
    use = str(folder) if args.dest else f"hub:{label}"
    print(f"{label} (commit {record['commit'][:12]}, {record['layers']} layers x {record['hidden']} hidden, "
          f"{size / 1e6:.1f} MB) -> {folder}")
    print(f"load it as {use}")
    return 0
