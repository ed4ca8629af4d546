"""The contextual study kind: BERT models pretrained on two corpus versions, word-type features.

Source pair: a held-out share of the corpus (for perplexity), the two versions of the rest
(:func:`embstab.data.make_corpus_pair`), one WordPiece tokenizer for both (the packaged MiniLM
vocabulary, fixed and so reproducible in any fresh store; or one trained on their union; or, with
``training.init``, the starting model's own), and a fixed sample of documents for word-type
averaging. Member: a BERT masked-LM whose hidden size is the study's dimension, pretrained from
scratch on one version (:func:`embstab.contextual.train_mlm`, same seed and steps for both), or,
with ``training.init``, the packaged MiniLM whose masked-LM pretraining continues on one version
(same starting weights, seed and steps; trained once at its hidden size, a smaller dimension of the
grid is the leading dimensions of its vectors: Matryoshka truncation, :func:`trained_dim`); read out as
word-type vectors over the sample (:func:`embstab.contextual.word_type_embedding`): the :class:`~embstab.Embedding` that is
compressed with the shared pair protocol and measured against the anchors (the largest model of
each version). Downstream: frozen sentence features of each member for a classification task,
compressed with the same pair protocol at the row's bit width
(:func:`embstab.contextual.compress_features`), then the same classifier and seed on each
(:func:`embstab.contextual.feature_disagreement`); or, for a retrieval task, each member's sentence
vectors of the queries and documents, compressed the same way, then exact cosine search
(:func:`embstab.downstream.retrieval.search`: the flipped share of queries, recall@k; at 1 bit the
compressed entries are the signs, searched as binary codes by Hamming distance). With
``compression.scheme: vector_store`` each member is stored on its own instead (float32,
sentence-transformers' int8 or binary codes) and searched as a vector store searches them
(:func:`embstab.contextual.retrieval.stored_search`). Memory is bits per feature vector.
"""

from __future__ import annotations

import functools
import io
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from embstab.contextual import pair_source as contextual_pair_source
from embstab.downstream.pairs import register_pair_source
from embstab.embedding import Embedding
from embstab.study.corpus import parse_corpus
from embstab.study.kinds import StudyKind
from embstab.study.settings import Setting, TaskRule, member_config, source_config
from embstab.study.steps import GLOBAL_RNG_LOCK, Steps, downstream_output, guarded, run_compress, stored
from embstab.study.store import ArtifactStore, config_hash

__all__ = ["KIND", "TRAINING", "SOURCE_SETTINGS", "INIT_MODELS", "trained_dim", "ALGORITHMS", "contextual_source_config",
           "contextual_train_config", "check_algorithms", "check_study", "corpus_vocabulary", "tasks",
           "source_settings", "start_model", "training_bytes", "run_source", "run_train", "run_downstream"]

#: The models a contextual study pretrains (a BERT masked-LM built from the study's settings).
ALGORITHMS = ("bert",)

#: Pretrained models a member can start from (``training.init``): name → (layers, hidden size,
#: position limit). Their hidden size is the study's largest dimension; kept here as numbers so that
#: parsing a study file does not load the model (``start_model`` checks the loaded model against them).
INIT_MODELS = {"builtin:minilm_l6": (6, 384, 512)}

#: ``training`` settings of a contextual study.
TRAINING = {
    # start from a pretrained model and continue its masked-LM pretraining (null: from scratch);
    # left out of the configuration when null, so from-scratch studies keep their artifacts' names
    "init": Setting(None, "choice", choices=tuple(INIT_MODELS), nullable=True, omit_default=True),
    # the model: hidden size = the study's dimension
    "layers": Setting(2, "int", 1, 48),
    "heads": Setting(2, "int", 1, 64),
    "intermediate_factor": Setting(4, "int", 1, 16),
    "max_length": Setting(128, "int", 8, 4096),
    # masked-LM pretraining
    "steps": Setting(200, "int", 1, 10_000_000),
    "batch_size": Setting(32, "int", 1, 100_000),
    "lr": Setting(5e-4, "float", 1e-8, 1.0),
    # made with the corpus pair: held-out text, tokenizer, word-type sample
    "heldout_fraction": Setting(0.02, "float", 0.001, 0.49),
    # minilm: the packaged vocabulary cut to vocab_size pieces the corpus uses (reproducible);
    # trained: a WordPiece vocabulary trained on the corpus (the tokenizers library's tie-breaking
    # makes it differ between runs)
    "tokenizer": Setting("minilm", "choice", choices=("minilm", "trained")),
    "vocab_size": Setting(8000, "int", 31, 1_000_000),
    "sample_docs": Setting(None, "int", 1, nullable=True),
    # word-type features
    "layer": Setting(-1, "int", -49, 48),
    "subword": Setting("first", "choice", choices=("first", "mean")),
    "min_count": Setting(3, "int", 1),
    "max_occurrences": Setting(50, "int", 1, nullable=True),
}
#: The settings that shape the source pair (part of the corpus stage's configuration).
SOURCE_SETTINGS = ("heldout_fraction", "tokenizer", "vocab_size", "sample_docs")
#: Settings a starting model fixes (its shape and its vocabulary): a study with ``init`` leaves them out.
_FIXED_BY_INIT = ("layers", "heads", "intermediate_factor", "tokenizer", "vocab_size")


def source_settings(params: Mapping[str, Any]) -> dict[str, Any]:
    """The training settings that belong to the source pair's configuration.

    Parameters
    ----------
    params : mapping
        The study's ``training`` settings (:meth:`~embstab.study.schema.TrainingSpec.params_dict`).

    Returns
    -------
    dict
        :data:`SOURCE_SETTINGS`; with a starting model, its name in place of the tokenizer settings
        (its own vocabulary is the tokenizer).
    """
    if params.get("init"):
        return {"init": params["init"], "heldout_fraction": params["heldout_fraction"],
                "sample_docs": params["sample_docs"]}
    return {k: params[k] for k in SOURCE_SETTINGS}


def check_algorithms(v: Any, value: Any) -> tuple[str, ...]:
    """``training.algorithms`` of a contextual study: ``[bert]``.

    Parameters
    ----------
    v : validator
        The schema's validator (its ``fail`` builds the error naming the key).
    value : Any
        The section as read from the study file.

    Returns
    -------
    tuple of str
        The algorithm names.

    Raises
    ------
    StudyDefinitionError
        A name other than ``bert``, naming its key.
    """
    return v.str_list(value, "training.algorithms", ALGORITHMS)


def check_study(v: Any, spec: Any) -> None:
    """Cross-checks: every hidden size splits into the attention heads; the layer exists. With a
    starting model (``init``): no dimension exceeds its hidden size, the settings it fixes are left
    out, the blocks fit its positions.

    Parameters
    ----------
    v : validator
        The schema's validator.
    spec : StudySpec
        The parsed study.

    Raises
    ------
    StudyDefinitionError
        Naming the key: a hidden size that the heads do not divide or whose model needs more memory
        than the machine has (:func:`training_bytes`), a layer that does not exist, or a setting that
        the starting model fixes.
    """
    p = spec.training.params_dict()
    if p.get("init"):
        _check_init(v, spec, p)
        return
    for i, dim in enumerate(spec.training.dimensions):
        if dim % p["heads"]:
            raise v.fail(f"training.dimensions[{i}]", f"hidden size {dim} is not a multiple of the "
                                                      f"{p['heads']} attention heads (training.heads)")
        _check_member_fits(v, f"training.dimensions[{i}]", dim, p)
    if not -(p["layers"] + 1) <= p["layer"] <= p["layers"]:
        raise v.fail("training.layer", f"layer {p['layer']} does not exist in a {p['layers']}-layer model "
                                       f"(0 = input embeddings, {p['layers']} or -1 = last)")


def training_bytes(dim: int, p: Mapping[str, Any]) -> tuple[int, int]:
    """Parameters of a member's BERT masked-LM, and the memory its pretraining needs, from the settings.

    float32 weights, their gradients and AdamW's two moments (16 bytes per parameter), plus one
    batch's activations (about 20 floats per position, hidden unit and layer). An estimate for
    refusing at planning what cannot run, not a measurement.

    Parameters
    ----------
    dim : int
        The hidden size (the study's dimension).
    p : mapping
        The study's ``training`` settings (``layers``, ``intermediate_factor``, ``max_length``,
        ``batch_size``, ``vocab_size``).

    Returns
    -------
    (int, int)
        Parameters, and bytes.
    """
    layers, inter = int(p["layers"]), int(p["intermediate_factor"]) * dim
    embeddings = (int(p["vocab_size"]) + int(p["max_length"]) + 2) * dim
    params = embeddings + layers * (4 * dim * dim + 2 * dim * inter) + dim * dim  # + the masked-LM head's transform
    activations = 20 * 4 * int(p["batch_size"]) * int(p["max_length"]) * dim * layers
    return params, 16 * params + activations


def _check_member_fits(v: Any, key: str, dim: int, p: Mapping[str, Any]) -> None:
    """Refuse, at planning, a hidden size whose model this machine cannot train (every row would fail)."""
    from embstab._resources import available_memory, format_bytes  # noqa: PLC0415

    available = available_memory()
    params, need = training_bytes(dim, p)
    if available is not None and need > available:
        raise v.fail(key, f"hidden size {dim} makes a {p['layers']}-layer BERT of about {params:.3g} parameters, "
                          f"whose pretraining needs about {format_bytes(need)}, more than the "
                          f"{format_bytes(available)} of memory available; use a smaller dimension")


def _check_init(v: Any, spec: Any, p: Mapping[str, Any]) -> None:
    init = p["init"]
    layers, hidden, positions = INIT_MODELS[init]
    wider = [d for d in spec.training.dimensions if d > hidden]
    if wider:
        raise v.fail("training.dimensions", f"a study that starts from {init} reads its {hidden} hidden dimensions "
                                            f"or their leading ones (Matryoshka truncation): {wider[0]} is more")
    for name in _FIXED_BY_INIT:
        if p[name] != TRAINING[name].default:
            raise v.fail(f"training.{name}", f"{init} fixes its own shape and vocabulary; remove this key "
                                             f"(got {p[name]!r})")
    if p["max_length"] > positions:
        raise v.fail("training.max_length", f"blocks of {p['max_length']} pieces do not fit the {positions} "
                                            f"positions of {init}")
    if not -(layers + 1) <= p["layer"] <= layers:
        raise v.fail("training.layer", f"layer {p['layer']} does not exist in {init}, a {layers}-layer model "
                                       f"(0 = input embeddings, {layers} or -1 = last)")


def trained_dim(spec: Any, dim: int) -> int:
    """The hidden size a member is trained at for the grid's ``dim``: a study that starts from a
    pretrained model trains it once, and reads a smaller ``dim`` as the leading dimensions of its
    vectors (Matryoshka truncation); a study from scratch trains each dimension.

    Parameters
    ----------
    spec : StudySpec
        The study.
    dim : int
        A dimension of the grid.

    Returns
    -------
    int
    """
    init = spec.training.params_dict().get("init")
    return INIT_MODELS[init][1] if init else int(dim)


def _leading(features: np.ndarray, pair: Mapping[str, Any], normalize: bool) -> np.ndarray:
    """A member's features cut to the pair's ``truncate`` leading dimensions (if it has one); sentence
    vectors that a search compares by cosine are re-normalised, as ``truncate_dim`` does."""
    if "truncate" not in pair:
        return features
    from embstab.compress.vectorstore import truncate_embeddings  # noqa: PLC0415

    return truncate_embeddings(features, int(pair["truncate"]), normalize=normalize)


def _stored_features(features: np.ndarray, bits: int) -> np.ndarray:
    """One member's feature rows as a vector store keeps them at ``bits`` (float32, int8 codes or ±1 signs)."""
    from embstab.compress.vectorstore import STORE_PRECISION_OF_BITS, compress_for_store  # noqa: PLC0415

    rows = Embedding([f"#{i}" for i in range(len(features))], np.asarray(features, np.float32))
    return np.asarray(compress_for_store(rows, STORE_PRECISION_OF_BITS[bits]).vectors, np.float32)


def tasks() -> dict[str, TaskRule]:
    """Classification tasks with the frozen-feature classifiers, and retrieval tasks with model ``search``.

    Returns
    -------
    dict of str to TaskRule
        One entry per classification task of :mod:`embstab.downstream` (the models are the
        frozen-feature classifiers, the options the downstream training settings and ``pooling``),
        and one per retrieval task (model ``search``; options ``limit``, ``split_seed`` and ``k``).
    """
    import inspect  # noqa: PLC0415

    from embstab.contextual.downstream import FEATURE_CLASSIFIERS  # noqa: PLC0415
    from embstab.contextual.features import POOLINGS  # noqa: PLC0415
    from embstab.downstream import MODELS, TASKS  # noqa: PLC0415
    from embstab.downstream import models as m  # noqa: PLC0415

    common = ("limit", "split_seed", "seed_b", "lr", "epochs", "batch_size", "patience", "threads")
    own: dict[str, Setting] = {}
    for cls in (m.LinearBoW, m.MeanMLP):  # the classes behind FEATURE_CLASSIFIERS
        own.update({p: Setting(None) for p in inspect.signature(cls.__init__).parameters
                    if p not in ("self", "table", "dim", "n_classes")})
    options = {**{o: Setting(None) for o in common}, **own,
               "pooling": Setting("mean", "choice", choices=POOLINGS)}
    models = tuple(c for c in FEATURE_CLASSIFIERS if c in MODELS)
    rules = {t: TaskRule(models, options) for t, (kind, _) in TASKS.items() if kind == "classification"}
    # retrieval: each member's sentence vectors search the task's documents (model search, nothing trained)
    searching = {"limit": Setting(None, "int", 10, nullable=True), "split_seed": Setting(0, "int", 0),
                 "k": Setting(10, "int", 1, 10_000)}
    rules.update({t: TaskRule(tuple(m for m, (k, _) in MODELS.items() if k == "retrieval"), searching)
                  for t, (kind, _) in TASKS.items() if kind == "retrieval"})
    return rules


# --------------------------------------------------------------------------------------------
# store codecs


def _folder_bytes(save: Any) -> bytes:
    with tempfile.TemporaryDirectory(prefix="embstab-bert-") as tmp:
        save(tmp)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for path in sorted(Path(tmp).iterdir()):
                tar.add(path, arcname=path.name)
        return buf.getvalue()


@functools.lru_cache(maxsize=2)
def _bert(store: ArtifactStore, key: str) -> Any:
    from embstab.contextual.model import load_model_dir  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="embstab-bert-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(store.get_bytes("bert", key, "tar")), mode="r") as tar:
            tar.extractall(tmp, filter="data")
        return load_model_dir(tmp)


@functools.lru_cache(maxsize=2)
def _docs(store: ArtifactStore, kind: str, key: str) -> list[list[str]]:
    return store.get_docs(kind, key)


def corpus_vocabulary(base: Any, docs: list[list[str]], size: int) -> Any:
    """``base``'s WordPiece tokenizer cut to at most ``size`` pieces chosen by the corpus.

    Kept: the five special tokens (ids 0-4, as in a trained tokenizer), every one-character piece
    of the corpus' characters (so every word still splits into pieces, not ``[UNK]``), then the
    pieces of the corpus' words from the most frequent word down (ties by the word) while they fit.
    WordPiece takes the longest vocabulary piece at each position, so a word whose pieces are all
    kept splits exactly as ``base`` splits it. Every choice is by count, then by text: the result
    is a function of ``base`` and ``docs`` (a WordPiece vocabulary trained with the tokenizers
    library breaks ties between equally frequent merges in hash order, which differs between runs).

    Parameters
    ----------
    base : tokenizers.Tokenizer
        A WordPiece tokenizer without post-processing (:func:`embstab.contextual.load_tokenizer`).
    docs : list of token lists
        The corpus.
    size : int
        Largest vocabulary (the characters may exceed it; then only they and the specials are kept).

    Returns
    -------
    tokenizers.Tokenizer
    """
    from collections import Counter  # noqa: PLC0415

    from tokenizers import Tokenizer  # noqa: PLC0415
    from tokenizers.models import WordPiece  # noqa: PLC0415

    from embstab.contextual.tokenizer import SPECIAL_TOKENS  # noqa: PLC0415

    vocab = base.get_vocab()
    counts = Counter(w for d in docs for w in d)
    words = sorted(counts, key=lambda w: (-counts[w], w))
    pieces = [enc.tokens for enc in base.encode_batch(words)]
    chars = {c for toks in pieces for t in toks for c in t.removeprefix("##")}
    kept = {p for c in chars for p in (c, "##" + c) if p in vocab}
    for toks in pieces:
        new = set(toks) - kept - set(SPECIAL_TOKENS)
        if len(SPECIAL_TOKENS) + len(kept) + len(new) > size:
            break
        kept |= new
    order = sorted(kept - set(SPECIAL_TOKENS), key=lambda p: vocab[p])
    tok = Tokenizer(WordPiece({p: i for i, p in enumerate([*SPECIAL_TOKENS, *order])}, unk_token="[UNK]",
                              max_input_chars_per_word=100))
    tok.normalizer, tok.pre_tokenizer, tok.decoder = base.normalizer, base.pre_tokenizer, base.decoder
    return tok


def _init_folder(name: str) -> Path:
    from embstab.contextual.pretrained import minilm_dir  # noqa: PLC0415

    return {"builtin:minilm_l6": minilm_dir}[name]()


def start_model(config: Mapping[str, Any], tokenizer: Any = None) -> Any:
    """The model a member's masked-LM training starts from.

    From scratch: a BERT whose hidden size is the member's dimension, initialised from its seed.
    With ``init``: the pretrained model itself, every encoder weight as packaged (only its
    masked-LM head, which the package does not ship, is initialised, identically at every load).

    Parameters
    ----------
    config : mapping
        The member's training configuration (``dim``, ``seed``, ``init`` and the shape settings).
    tokenizer : tokenizers.Tokenizer, optional
        The source pair's tokenizer (unused with ``init``: a pretrained model reads its own vocabulary).

    Returns
    -------
    ContextualModel

    Raises
    ------
    EmbstabError
        If the pretrained model's shape is not the one :data:`INIT_MODELS` records.
    """
    from embstab.contextual.model import ModelSize, build_model  # noqa: PLC0415
    from embstab.contextual.pretrained import load_model  # noqa: PLC0415
    from embstab.errors import EmbstabError  # noqa: PLC0415

    init = config.get("init")
    if init:
        model = load_model(init)
        shape = (model.n_layers, model.hidden_size, model.max_length)
        if shape != INIT_MODELS[init]:
            raise EmbstabError(f"{init} loaded as {shape[0]} layers x {shape[1]} hidden with {shape[2]} positions, "
                               f"not the {INIT_MODELS[init]} a study expects; reinstall its package")
        return model
    dim = int(config["dim"])
    size = ModelSize(int(config["layers"]), dim, int(config["heads"]), int(config["intermediate_factor"]) * dim)
    return build_model(size, tokenizer, int(config["seed"]), max_length=int(config["max_length"]))


def _tokenizer(store: ArtifactStore, key: str) -> Any:
    from tokenizers import Tokenizer  # noqa: PLC0415

    from embstab.contextual.tokenizer import plain_tokenizer  # noqa: PLC0415

    return plain_tokenizer(Tokenizer.from_str(store.get_bytes("tokenizer", key, "wordpiece").decode("utf-8")))


# --------------------------------------------------------------------------------------------
# task functions


@guarded("corpus")
@stored(("docs", "corpus_new"), ("docs", "corpus_old"))
def run_source(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any]) -> str:
    """Held-out text, the corpus pair, the tokenizer of their union and the word-type sample.

    Parameters
    ----------
    store : ArtifactStore
        Where inputs are read and outputs written.
    steps : Steps
        The computations bundle (its corpus loaders serve the contextual kind).
    key : str
        The task's configuration hash (the name of its artifacts).
    config : mapping
        The task's configuration.

    Returns
    -------
    str
        ``key``.
    """
    from embstab.contextual.pretrain import split_heldout  # noqa: PLC0415
    from embstab.contextual.pretrained import minilm_dir  # noqa: PLC0415
    from embstab.contextual.tokenizer import load_tokenizer, train_wordpiece  # noqa: PLC0415

    docs = steps.load_corpus(config["name"])
    if config.get("max_docs"):
        docs = docs[: int(config["max_docs"])]
    train_docs, held = split_heldout(docs, config["heldout_fraction"], seed=config["seed"])
    old, new = steps.make_corpus_pair(train_docs, kind=config["pair"], fraction=config["fraction"],
                                      seed=config["seed"])
    if config.get("init"):
        # a pretrained model reads its own vocabulary: its embedding rows are numbered by it
        tokenizer = load_tokenizer(_init_folder(config["init"]))
    elif config["tokenizer"] == "trained":
        # one WordPiece vocabulary for both versions, trained on A ∪ B; the tokenizers library breaks
        # ties between equally frequent merges in hash order, so two fresh stores may differ
        tokenizer = train_wordpiece(train_docs, vocab_size=config["vocab_size"])
    else:
        # the packaged MiniLM WordPiece vocabulary cut to the pieces of the corpus' frequent words:
        # chosen by counts, so a study reproduces in any fresh store
        tokenizer = corpus_vocabulary(load_tokenizer(minilm_dir()), train_docs, config["vocab_size"])
    sample = train_docs[: config["sample_docs"]] if config.get("sample_docs") else train_docs
    store.put_bytes("tokenizer", key, "wordpiece", tokenizer.to_str().encode("utf-8"), config)
    store.put_docs("corpus_heldout", key, held, config)
    store.put_docs("corpus_sample", key, sample, config)
    store.put_docs("corpus_old", key, old, config)
    store.put_docs("corpus_new", key, new, config)  # last: the pair counts as present once it exists
    return key


@guarded("train")
@stored(("embedding", "embedding"), ("file", "bert", "tar"))
def run_train(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any], source_key: str) -> str:
    """Pretrain one BERT on one corpus version and read out its word-type embedding (artifacts
    ``bert``: the model; ``embedding``: the word types, held-out perplexity in its metadata).

    Parameters
    ----------
    store : ArtifactStore
        Where inputs are read and outputs written.
    steps : Steps
        The computations bundle (its corpus loaders serve the contextual kind).
    key : str
        The task's configuration hash (the name of its artifacts).
    config : mapping
        The task's configuration.
    source_key : str
        The corpus pair's artifacts (documents, tokenizer, sample).

    Returns
    -------
    str
        ``key``.
    """
    from embstab.contextual.features import word_type_embedding  # noqa: PLC0415
    from embstab.contextual.pretrain import train_mlm  # noqa: PLC0415

    init = config.get("init")
    side, seed = config["side"], int(config["seed"])
    name = (f"{init.removeprefix('builtin:')}-mlm{config['steps']}-{side}-s{seed}" if init
            else f"bert-{config['layers']}x{config['dim']}-{side}-s{seed}")
    # initialisation and dropout draw from torch's process-global RNG (seeded, then restored):
    # one pretraining at a time per process keeps each model a function of its seed
    with GLOBAL_RNG_LOCK:
        start = start_model(config, None if init else _tokenizer(store, source_key))
        # a pretrained model has more positions than a block needs: the block length is the setting
        result = train_mlm(start, _docs(store, f"corpus_{side}", source_key), int(config["steps"]), seed,
                           heldout=_docs(store, "corpus_heldout", source_key), batch_size=int(config["batch_size"]),
                           lr=float(config["lr"]), block_length=int(config["max_length"]) if init else None,
                           name=name)
    emb = word_type_embedding(result.model, _docs(store, "corpus_sample", source_key), layer=int(config["layer"]),
                              subword=config["subword"], min_count=int(config["min_count"]),
                              max_occurrences=config["max_occurrences"])
    emb = emb.with_vectors(emb.vectors, heldout_loss=result.heldout_loss,
                           heldout_perplexity=result.heldout_perplexity, mlm_steps=result.steps,
                           initial_heldout_loss=result.initial_heldout_loss, init=init)
    store.put_bytes("bert", key, "tar", _folder_bytes(result.model.save), config)
    store.put_embedding("embedding", key, emb, config)
    return key


def _features(store: ArtifactStore, train_cfg: Mapping[str, Any], task: str, options: Mapping[str, Any]) -> np.ndarray:
    """Sentence features of one member for one task, extracted once (artifact ``features``)."""
    from embstab.contextual.downstream import task_features  # noqa: PLC0415

    cfg = {"stage": "features", "train": dict(train_cfg), "task": task, "limit": options.get("limit"),
           "split_seed": options.get("split_seed", 0), "pooling": options.get("pooling", "mean")}
    key = config_hash(cfg)
    if store.exists("features", key, "npy"):
        return np.load(io.BytesIO(store.get_bytes("features", key, "npy")), allow_pickle=False)
    model = _bert(store, config_hash(train_cfg))
    feats = task_features(model, task, split_seed=cfg["split_seed"], limit=cfg["limit"], layer=int(train_cfg["layer"]),
                          pooling=cfg["pooling"])
    buf = io.BytesIO()
    np.save(buf, feats, allow_pickle=False)
    store.put_bytes("features", key, "npy", buf.getvalue(), cfg)
    return feats


def _retrieval_features(store: ArtifactStore, train_cfg: Mapping[str, Any], task: str,
                        options: Mapping[str, Any]) -> np.ndarray:
    """Sentence vectors of one member for a retrieval task's queries, then its documents, extracted once
    (artifact ``features``): the model's own pipeline (pooling, normalisation, length limit)."""
    from embstab.contextual.retrieval import text_encoder  # noqa: PLC0415
    from embstab.downstream.api import load_task  # noqa: PLC0415

    cfg = {"stage": "retrieval_features", "train": dict(train_cfg), "task": task, "limit": options.get("limit"),
           "split_seed": options.get("split_seed", 0)}
    key = config_hash(cfg)
    if store.exists("features", key, "npy"):
        return np.load(io.BytesIO(store.get_bytes("features", key, "npy")), allow_pickle=False)
    data = load_task(task, cfg["split_seed"], cfg["limit"])
    encode = text_encoder(_bert(store, config_hash(train_cfg)), layer=int(train_cfg["layer"]))
    feats = np.vstack([encode(data.queries), encode(data.documents)])
    buf = io.BytesIO()
    np.save(buf, feats, allow_pickle=False)
    store.put_bytes("features", key, "npy", buf.getvalue(), cfg)
    return feats


def _retrieval_downstream(store: ArtifactStore, config: Mapping[str, Any]) -> dict[str, Any]:
    """Both members' query and document vectors compressed together with the pair protocol, then exact
    cosine search: the share of queries whose top-k set differs, each member's recall@k."""
    from embstab.contextual.compression import compress_features  # noqa: PLC0415
    from embstab.downstream.api import load_task  # noqa: PLC0415
    from embstab.downstream.intervals import disagreement_interval  # noqa: PLC0415
    from embstab.downstream.retrieval import chance_levels, search, top_k_churn  # noqa: PLC0415

    pair = config["pair"]
    options = dict(config.get("options") or {})
    k, split_seed, limit = int(options.get("k", 10)), int(options.get("split_seed", 0)), options.get("limit")
    data = load_task(config["task"], split_seed, limit)
    chance, chance_mrr = chance_levels(k, data.n_documents)
    old = _leading(_retrieval_features(store, pair["old"], config["task"], options), pair, normalize=True)
    new = _leading(_retrieval_features(store, pair["new"], config["task"], options), pair, normalize=True)
    n = data.n_queries
    if pair.get("scheme") == "vector_store":
        # each member's own store: its documents cut the int8 buckets, its queries use them, the
        # codes are searched as sentence-transformers searches them
        from embstab.compress.vectorstore import STORE_PRECISION_OF_BITS  # noqa: PLC0415
        from embstab.contextual.retrieval import stored_search  # noqa: PLC0415

        store_precision = STORE_PRECISION_OF_BITS[int(pair["bits"])]
        runs = [stored_search(x[:n], x[n:], k, relevant=data.relevant, precision=store_precision) for x in (old, new)]
    else:
        seed = pair["seed"] if pair["rounding"].startswith("stochastic") else None
        # one matrix per member, queries then documents: the clip and the rotation are the pair's, as for
        # classification features
        old_q, new_q = compress_features(old, new, bits=int(pair["bits"]), rounding=pair["rounding"], seed=seed)
        # at 1 bit each entry keeps only its sign: the store's binary codes, searched by Hamming distance
        # (cosine of the ±clip vectors ranks alike, but float rounding would break its ties, not the index)
        precision = "binary" if int(pair["bits"]) == 1 else "float32"
        runs = [search(x[:n], x[n:], k, relevant=data.relevant, precision=precision) for x in (old_q, new_q)]
    flipped, overlap = top_k_churn(runs[0].top_k, runs[1].top_k)
    low, high = disagreement_interval(flipped, n)
    details = {"quality_metric": f"recall@{k} (%)", "k": k, "n_documents": data.n_documents,
               "overlap_at_k": overlap, "mrr_old": runs[0].mrr(), "mrr_new": runs[1].mrr(), "chance_mrr": chance_mrr,
               "ties_at_k_old": runs[0].ties_at_k, "ties_at_k_new": runs[1].ties_at_k,
               "disagreement_low": low, "disagreement_high": high}
    return downstream_output(100.0 * flipped / n, runs[0].recall(), runs[1].recall(), n, chance=chance,
                             details=details)


@guarded("downstream")
@stored(("json", "downstream"), load=True)
def run_downstream(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any],
                   pair_key: str) -> dict[str, Any]:
    """Frozen-feature disagreement: both members' sentence features compressed with the pair
    protocol at the row's bit width, then one classifier per member with the same seed; for a
    retrieval task (model ``search``), both members' query and document vectors compressed the same
    way, then exact cosine search.

    Parameters
    ----------
    store : ArtifactStore
        Where inputs are read and outputs written.
    steps : Steps
        The computations bundle (its corpus loaders serve the contextual kind).
    key : str
        The task's configuration hash (the name of its artifacts).
    config : mapping
        The task's configuration.
    pair_key : str
        The compressed pair (its configuration names both members).

    Returns
    -------
    dict
        ``disagreement`` and both members' qualities (:func:`embstab.study.steps.downstream_output`), in percent
        (accuracy; retrieval: recall@k), ``chance`` (the majority-class accuracy; retrieval: a random
        ranking's recall@k), ``n_test`` and ``details``.
    """
    if config["model"] == "search":
        value = _retrieval_downstream(store, config)
        store.put_json("downstream", key, value, config)
        return value
    from embstab.contextual.compression import compress_features  # noqa: PLC0415
    from embstab.contextual.downstream import feature_disagreement  # noqa: PLC0415

    pair = config["pair"]
    options = dict(config.get("options") or {})
    old = _leading(_features(store, pair["old"], config["task"], options), pair, normalize=False)
    new = _leading(_features(store, pair["new"], config["task"], options), pair, normalize=False)
    if pair.get("scheme") == "vector_store":  # each member's features as its own store keeps them
        old_q, new_q = (_stored_features(x, int(pair["bits"])) for x in (old, new))
    else:
        seed = pair["seed"] if pair["rounding"].startswith("stochastic") else None
        old_q, new_q = compress_features(old, new, bits=int(pair["bits"]), rounding=pair["rounding"], seed=seed)
    options.pop("pooling", None)
    with GLOBAL_RNG_LOCK:
        result = feature_disagreement(old_q, new_q, config["task"], config["model"], int(config["seed"]), **options)
    value = downstream_output(result.disagreement, result.quality_old, result.quality_new, int(result.n_test),
                              chance=float(result.settings["chance"]), details={"quality_metric": "accuracy (%)"})
    store.put_json("downstream", key, value, config)
    return value


def contextual_source_config(spec: Any) -> dict[str, Any]:
    """The corpus pair's configuration with the settings made with it (tokenizer, held-out text,
    word-type sample); every other configuration nests it.

    Parameters
    ----------
    spec : StudySpec
        The study.

    Returns
    -------
    dict
        Plan and embstab versions, stage ``corpus``, ``kind``, the corpus section's fields and
        :func:`source_settings`.
    """
    return source_config("corpus", spec.source_spec, kind="contextual", **source_settings(spec.training.params_dict()))


def contextual_train_config(spec: Any, side: str, v: Any) -> dict[str, Any]:
    """One BERT pretrained on one corpus version: its dimension, seed and training settings.

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
    return member_config(spec, side, v, contextual_source_config(spec))


KIND = StudyKind(
    name="contextual", label="contextual embeddings (BERT word-type features)", memory_unit="bits per feature vector",
    source_key="corpus", parse_source=parse_corpus, algorithms=check_algorithms, training=TRAINING, tasks=tasks,
    check=check_study, source_config=contextual_source_config, train_config=contextual_train_config,
    run_source=run_source, run_train=run_train, run_compress=run_compress, run_downstream=run_downstream,
    trained_dim=trained_dim, vector_store=True,
)


# `embstab downstream OLD NEW` (embstab.downstream.pair_disagreement) reaches this kind's pairs through
# this source: reading embstab.kinds.KINDS imports this module, so the registration is in place first
register_pair_source("contextual", contextual_pair_source.claims_contextual_pair,
                     contextual_pair_source.run_contextual_pair, label=contextual_pair_source.LABEL,
                     members=contextual_pair_source.MEMBERS, check=contextual_pair_source.check_contextual_pair)
