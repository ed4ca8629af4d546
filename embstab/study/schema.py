"""Study definitions: the YAML schema, its validation, and the frozen :class:`StudySpec`.

A study is a grid: corpus pair × algorithms × dimensions × bit widths × seeds, measured with a set
of stability measures and used downstream on a set of (task, model) pairs, plus the memory budgets
the recommendation is printed for. Everything is validated before anything runs, and every problem
is reported with the dotted key that holds it (``training.dimensions[2]``), so a user can fix the
file without reading code.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from embstab._bits import BIT_WIDTHS, check_bits
from embstab._numbers import is_integer, is_real
from embstab.errors import ConfigError, EmbstabError, did_you_mean
from embstab.study.kinds import KINDS, StudyKind

__all__ = [
    "StudyDefinitionError",
    "TrainingSpec",
    "CompressionSpec",
    "MeasureSpec",
    "DownstreamSpec",
    "CalibrationSpec",
    "StudySpec",
    "parse_study",
    "load_study",
    "MAX_BITS",
    "MAX_ROWS",
]

_ROUNDINGS = ("nearest", "stochastic", "stochastic:K")
MAX_BITS = max(BIT_WIDTHS)
#: Most result rows one study may plan: 7 times the paper's full grid (5 algorithms x 6 dimensions x
#: 6 bit widths x 3 seeds x 5 tasks), about a day of rows on two cores. Beyond it, planning alone
#: takes minutes and gigabytes, and a typo in a list (a thousand seeds) would go unnoticed.
MAX_ROWS = 20_000


class StudyDefinitionError(ConfigError):
    """A study definition is malformed; the message names the offending key.

    Parameters
    ----------
    key : str
        Dotted path of the offending key (``"training.dimensions[1]"``), or ``""`` for the file.
    problem : str
        What is wrong, in words.
    source : str, optional
        The study file, when the definition came from one.
    """

    def __init__(self, key: str, problem: str, source: str | None = None):
        self.key = key
        self.problem = problem
        self.source = source
        where = f"{source}: " if source else ""
        what = f"key '{key}': " if key else ""
        super().__init__(f"{where}{what}{problem}")


@dataclass(frozen=True)
class TrainingSpec:
    """The embedding grid: every algorithm × dimension × seed is trained on both corpora."""

    algorithms: tuple[str, ...]
    dimensions: tuple[int, ...]
    seeds: tuple[int, ...]
    epochs: int = 5
    min_count: int = 5
    window: int = 5
    #: Training recipes (precision of the tables while they are fitted); ``fp32`` is the reference.
    recipes: tuple[str, ...] = ("fp32",)
    #: The kind's trainer settings (:attr:`~embstab.study.kinds.StudyKind.training`) as sorted
    #: ``(name, value)`` pairs; a setting that is itself a mapping is held as sorted pairs too, so
    #: the spec stays hashable.
    params: tuple[tuple[str, Any], ...] = ()

    def params_dict(self) -> dict[str, Any]:
        """``params`` as a dict.

        Returns
        -------
        dict
            Parameter name → value (a new dict; a mapping setting, such as a KG study's
            ``early_stopping``, as a dict).
        """
        return {name: dict(value) if isinstance(value, tuple) else value for name, value in self.params}


#: How a study stores a pair at each bit width (``compression.scheme``).
SCHEMES = ("uniform", "vector_store")


@dataclass(frozen=True)
class CompressionSpec:
    """Bit widths of the uniform-quantization pair protocol (32 = full precision), and the
    transforms applied around it (``none``, ``hadamard``, ``ocs:0.03``, ``tt:8`` ...).

    ``scheme`` ``"vector_store"`` stores each member as a vector store does instead: 32 bits as
    float32, 8 as sentence-transformers' int8 codes (per-dimension buckets cut on that member's
    own rows), 1 as its binary codes, each member on its own (no alignment, no shared clip).
    """

    bit_widths: tuple[int, ...]
    rounding: str = "nearest"
    transforms: tuple[str, ...] = ("none",)
    scheme: str = "uniform"


@dataclass(frozen=True)
class MeasureSpec:
    """Which stability measures to compute on the top-``top_n`` shared words, with what parameters.

    ``params`` holds, per measure, the parameters that override the registry's defaults (the same
    mapping :func:`embstab.compare` takes), as sorted tuples so the spec stays hashable.
    """

    names: tuple[str, ...]
    top_n: int = 10000
    params: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()

    def params_dict(self) -> dict[str, dict[str, Any]]:
        """``params`` as ``{measure: {parameter: value}}``, the form :func:`embstab.compare` takes.

        Returns
        -------
        dict of str to dict
            Measure name → parameter name → value (new dicts).
        """
        return {name: dict(items) for name, items in self.params}


@dataclass(frozen=True)
class DownstreamSpec:
    """One downstream task trained on both embeddings of a pair; ``label`` names its rows."""

    task: str
    model: str = "linear"
    label: str = ""
    options: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class CalibrationSpec:
    """Run the downstream models on a seeded share of the rows only and predict the others'
    disagreement from their measures (see :mod:`embstab.study.calibrate`)."""

    #: Share of each (algorithm, task)'s rows whose downstream models run, in (0, 1].
    share: float
    #: Seed of the choice of those rows.
    seed: int = 0
    #: Nominal coverage of the predicted rows' intervals.
    level: float = 0.9


@dataclass(frozen=True)
class StudySpec:
    """A validated study definition (see :func:`parse_study` for the YAML layout)."""

    name: str
    #: The source section the kind parsed (a word study's corpus pair, a KG study's graph versions...).
    source_spec: Any
    training: TrainingSpec
    compression: CompressionSpec
    measures: MeasureSpec
    downstream: tuple[DownstreamSpec, ...]
    budgets: tuple[int, ...] = ()
    description: str = ""
    source: str | None = field(default=None, compare=False)
    #: The study kind (a key of :data:`embstab.study.kinds.KINDS`).
    kind: str = "word"
    #: Downstream models on a share of the rows only, the others predicted (None: every row measured).
    calibrate: CalibrationSpec | None = None

    @property
    def study_kind(self) -> StudyKind:
        """The registered kind of this study."""
        return KINDS[self.kind]

    @property
    def anchor_dim(self) -> int:
        """Dimension of the anchors: the highest dimension of the grid (spec: anchors = max-d, 32-bit)."""
        return max(self.training.dimensions)

    def to_dict(self) -> dict[str, Any]:
        """The definition as plain data (what :func:`parse_study` accepts), without ``source``.

        Returns
        -------
        dict
            Plain data; axes left at their defaults (and a word study's ``kind``) are omitted, so that
            older definitions keep their fingerprint.
        """
        out = asdict(self)
        out.pop("source")
        # the source section under its kind's key; a word study's definition reads as it did before
        # kinds existed (no "kind" key: same fingerprint)
        out[self.study_kind.source_key] = out.pop("source_spec")
        if self.kind == "word":
            out.pop("kind")
        if self.calibrate is None:  # absent: the definition and its fingerprint read as before the option
            out.pop("calibrate")
        t = self.training
        out["training"] = {"algorithms": list(t.algorithms), "dimensions": list(t.dimensions),
                           "seeds": list(t.seeds), **t.params_dict()}
        # default axes are left out, so adding an axis does not change older studies' fingerprints
        if tuple(t.recipes) != ("fp32",):
            out["training"]["recipes"] = list(t.recipes)
        if tuple(out["compression"]["transforms"]) == ("none",):
            out["compression"].pop("transforms")
        if out["compression"]["scheme"] == "uniform":
            out["compression"].pop("scheme")
        out["measures"] = {"names": list(self.measures.names), "top_n": self.measures.top_n,
                           **({"params": self.measures.params_dict()} if self.measures.params else {})}
        out["downstream"] = [
            {"task": d.task, "model": d.model, "label": d.label, **({"options": dict(d.options)} if d.options else {})}
            for d in self.downstream
        ]
        return out

    def fingerprint(self) -> str:
        """Short hash of the definition (identifies the study in the results database).

        Returns
        -------
        str
            The first 16 hex digits of the SHA-256 of :meth:`to_dict` as sorted JSON.
        """
        blob = json.dumps(self.to_dict(), sort_keys=True, default=list).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def n_rows(self) -> int:
        """Number of result rows: one per (algo, recipe, seed, dim, bitrate, transform, downstream entry).

        Returns
        -------
        int
            The product of the axis lengths and the number of downstream entries.
        """
        return math.prod(self.row_axes().values())

    def row_axes(self) -> dict[str, int]:
        """The keys whose entries multiply into rows, with their number of entries.

        Returns
        -------
        dict of str to int
            Dotted key (``"training.seeds"``) → number of entries.
        """
        t, c = self.training, self.compression
        return {"training.algorithms": len(t.algorithms), "training.recipes": len(t.recipes),
                "training.seeds": len(t.seeds), "training.dimensions": len(t.dimensions),
                "compression.bit_widths": len(c.bit_widths), "compression.transforms": len(c.transforms),
                "downstream": len(self.downstream)}

    def check_size(self) -> None:
        """Refuse a study of more than :data:`MAX_ROWS` rows, naming the keys that multiply.

        Raises
        ------
        StudyDefinitionError
            If :meth:`n_rows` is more than :data:`MAX_ROWS`.
        """
        rows = self.n_rows()
        if rows > MAX_ROWS:
            axes = " x ".join(f"{key} ({n:,})" for key, n in self.row_axes().items() if n > 1)
            raise StudyDefinitionError("", f"the study would plan {rows:,} rows ({axes}), more than the {MAX_ROWS:,} "
                                           "one study may plan; shorten these lists or split the study", self.source)


# --------------------------------------------------------------------------------------------
# validation helpers: each takes the dotted key so messages can name it


class _Validator:
    def __init__(self, source: str | None):
        self.source = source

    def fail(self, key: str, problem: str) -> StudyDefinitionError:
        return StudyDefinitionError(key, problem, self.source)

    def mapping(self, value: Any, key: str, allowed: dict[str, bool]) -> dict[str, Any]:
        """Check ``value`` is a mapping with only ``allowed`` keys (name → required)."""
        if not isinstance(value, dict):
            raise self.fail(key, f"must be a mapping, got {type(value).__name__}")
        for k in value:
            if k not in allowed:
                hint = did_you_mean(str(k), allowed) or f" (allowed: {', '.join(allowed)})"
                raise self.fail(_join(key, str(k)), f"unknown key{hint}")
        for k, required in allowed.items():
            if required and k not in value:
                raise self.fail(_join(key, k), "is required but missing")
        return value

    def integer(self, value: Any, key: str, minimum: int | None = None, maximum: int | None = None) -> int:
        if not is_integer(value):
            raise self.fail(key, f"must be an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.fail(key, f"must be >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise self.fail(key, f"must be <= {maximum}, got {value}")
        return value

    def number(self, value: Any, key: str, low: float, high: float, *, open_low: bool = False,
               open_high: bool = False) -> float:
        if not is_real(value):
            raise self.fail(key, f"must be a number, got {value!r}")
        ok = (value > low if open_low else value >= low) and (value < high if open_high else value <= high)
        if not ok:
            left, right = "(" if open_low else "[", ")" if open_high else "]"
            raise self.fail(key, f"must be in {left}{low}, {high}{right}, got {value}")
        return float(value)

    def string(self, value: Any, key: str, choices: tuple[str, ...] | None = None) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"must be a non-empty string, got {value!r}")
        if choices is not None and value not in choices:
            hint = did_you_mean(value, choices)
            raise self.fail(key, f"unknown value {value!r} (choose from {', '.join(choices)}){hint}")
        return value

    def int_list(self, value: Any, key: str, minimum: int, maximum: int | None = None) -> tuple[int, ...]:
        items = self.sequence(value, key)
        out = tuple(self.integer(v, f"{key}[{i}]", minimum, maximum) for i, v in enumerate(items))
        self.unique(out, key)
        return out

    def str_list(self, value: Any, key: str, choices: tuple[str, ...]) -> tuple[str, ...]:
        items = self.sequence(value, key)
        out = tuple(self.string(v, f"{key}[{i}]", choices) for i, v in enumerate(items))
        self.unique(out, key)
        return out

    def sequence(self, value: Any, key: str) -> list[Any]:
        if isinstance(value, (str, bytes, dict)) or not isinstance(value, (list, tuple)):
            raise self.fail(key, f"must be a list, got {type(value).__name__}")
        if not value:
            raise self.fail(key, "must not be empty")
        return list(value)

    def unique(self, values: tuple[Any, ...], key: str) -> None:
        seen: set[Any] = set()
        for i, v in enumerate(values):
            if v in seen:
                raise self.fail(f"{key}[{i}]", f"duplicate value {v!r}")
            seen.add(v)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _check_task_option_values(v: _Validator, key: str, options: dict[str, Any]) -> None:
    """Range checks of the common options (a model's own options are checked by the model)."""
    # null is allowed: it means "no limit" / the model's default (patience: no early stopping)
    for name in ("limit", "epochs", "batch_size", "threads", "patience", "max_len"):
        if options.get(name) is not None:
            v.integer(options[name], f"{key}.{name}", 1)
    for name in ("split_seed", "seed_b"):
        if options.get(name) is not None:
            v.integer(options[name], f"{key}.{name}", 0, 2**32 - 1)
    if "lr" in options:  # the optimiser itself rejects a negative rate (its message names it)
        v.number(options["lr"], f"{key}.lr", float("-inf"), float("inf"), open_low=True, open_high=True)
    if "min_coverage" in options:
        v.number(options["min_coverage"], f"{key}.min_coverage", 0.0, 1.0)


def _available_measures(geometry: str) -> tuple[str, ...]:
    from embstab.measures import measures_for  # noqa: PLC0415

    return measures_for(geometry)  # the measures of the kind's geometry


# --------------------------------------------------------------------------------------------


def _bit_widths(v: _Validator, value: Any) -> tuple[int, ...]:
    """``compression.bit_widths``: a list of distinct widths from the one set every quantizer takes."""
    widths = []
    for i, b in enumerate(v.sequence(value, "compression.bit_widths")):
        try:
            widths.append(check_bits(b, "a bit width"))
        except ValueError as exc:
            raise v.fail(f"compression.bit_widths[{i}]", str(exc)) from None
    v.unique(tuple(widths), "compression.bit_widths")
    return tuple(widths)


def _check_scheme(v: _Validator, kind: Any, compression: CompressionSpec) -> None:
    """``compression.scheme: vector_store``: the widths a vector store keeps, no transform, a kind it can hold."""
    if compression.scheme == "uniform":
        return
    from embstab.compress.vectorstore import STORE_PRECISION_OF_BITS  # noqa: PLC0415

    if not kind.vector_store:
        applies = ", ".join(k.name for k in KINDS.values() if k.vector_store)
        raise v.fail("compression.scheme", f"a vector store holds the vectors of {applies} studies, not of a "
                                           f"{kind.name} study")
    for i, bits in enumerate(compression.bit_widths):
        if bits not in STORE_PRECISION_OF_BITS:
            kept = ", ".join(f"{b} ({p})" for b, p in STORE_PRECISION_OF_BITS.items())
            raise v.fail(f"compression.bit_widths[{i}]", f"a vector store keeps {kept} bits per value, not {bits}")
    if compression.transforms != ("none",):
        raise v.fail("compression.transforms", "a vector store quantizes the vectors as they are: no transforms")


def _study_rounding(v: _Validator, value: Any) -> str:
    """``compression.rounding``: nearest, stochastic or stochastic:K (K random bits), canonicalised."""
    from embstab.lowprec.rounding import check_rounding

    text = v.string(value, "compression.rounding")
    try:
        canonical = check_rounding(text)
    except ValueError as exc:
        if ":" in text or "(" in text:  # a malformed stochastic:K; say what is wrong with K
            raise v.fail("compression.rounding", str(exc)) from None
        canonical = None
    if canonical is None or (canonical != "nearest" and not canonical.startswith("stochastic")):
        return v.string(text, "compression.rounding", _ROUNDINGS)  # raises, with a did-you-mean hint
    return canonical


def _training_recipes(v: _Validator, value: Any) -> tuple[str, ...]:
    """``training.recipes``: names of :data:`embstab.recipes.TRAINING_RECIPES`, fp32 first when present."""
    from embstab.recipes.training import TRAINING_RECIPES  # noqa: PLC0415

    names = v.str_list(value, "training.recipes", tuple(TRAINING_RECIPES))
    return tuple(sorted(names, key=lambda r: r != "fp32"))


def _transforms(v: _Validator, value: Any) -> tuple[str, ...]:
    """``compression.transforms``: canonical spellings of :func:`embstab.compress.parse_transform`."""
    from embstab.compress.transforms import parse_transform  # noqa: PLC0415
    from embstab.errors import EmbstabError  # noqa: PLC0415

    out: dict[str, None] = {}  # ordered, and a set's lookup: a long list costs no quadratic scan
    for i, item in enumerate(v.sequence(value, "compression.transforms")):
        try:
            name = parse_transform(str(item) if isinstance(item, (str, int, float)) else item).name
        except EmbstabError as exc:
            raise v.fail(f"compression.transforms[{i}]", str(exc)) from None
        if name in out:
            raise v.fail(f"compression.transforms[{i}]", f"{name!r} is listed twice")
        out[name] = None
    return tuple(out)


#: Study-file keys of earlier versions, read as ``params`` entries: key -> (measure, parameter).
_LEGACY_MEASURE_KEYS = {"knn_k": ("knn", "k"), "knn_queries": ("knn", "n_queries"), "eis_alpha": ("eis", "alpha")}


def _measure_params(v: _Validator, m: dict[str, Any], names: tuple[str, ...]) -> tuple:
    """``measures.params`` checked against each measure's signature (plus the legacy keys)."""
    import inspect  # noqa: PLC0415

    from embstab.measures import REGISTRY  # noqa: PLC0415

    raw: dict[str, dict[str, Any]] = {}
    for legacy, (measure, param) in _LEGACY_MEASURE_KEYS.items():
        if legacy in m:
            raw.setdefault(measure, {})[param] = m[legacy]
    given = v.mapping(m.get("params") or {}, "measures.params", {name: False for name in names})
    for measure, values in given.items():
        info = REGISTRY[measure]
        accepted = [p for p in inspect.signature(info.func).parameters if p not in ("X", "Y", "anchor_x", "anchor_y")]
        checked = v.mapping(values, f"measures.params.{measure}", {p: False for p in accepted})
        raw.setdefault(measure, {}).update(checked)
    for measure, values in raw.items():
        for param, value in values.items():
            key = f"measures.params.{measure}.{param}"
            if param in ("k", "n_queries", "seed"):
                values[param] = v.integer(value, key, 0 if param == "seed" else 1)
            elif param in ("alpha", "exponent"):
                values[param] = v.number(value, key, 0.0, 100.0)
    return tuple(sorted((measure, tuple(sorted(values.items()))) for measure, values in raw.items()))


def parse_study(data: Any, source: str | None = None) -> StudySpec:
    """Validate a study definition given as plain data and return a :class:`StudySpec`.

    Layout (keys marked * are required)::

        name*: default                  # identifies the study in the results database
        description: free text
        corpus*:   {name*, pair: leave_out|extend, fraction: 0.05, seed: 0, max_docs: null}
        training*: {algorithms*: [w2v_cbow], dimensions*: [25, 50], seeds*: [1234, 1235],
                    epochs: 5, min_count: 5, window: 5,
                    recipes: [fp32, bf16-nearest, bf16-stochastic, bf16-kahan, swalp]}  # glove/mc only
        compression*: {bit_widths*: [1, 2, 4, 8, 16, 32], rounding: nearest|stochastic|stochastic:K,
                       transforms: [none, hadamard, "ocs:0.03", "hadamard+ocs:0.03", "tt:8"]}
        measures*: {names*: [eis, knn, ...], top_n: 10000, params: {knn: {k: 5, n_queries: 1000},
                    eis: {alpha: 3.0}}}   (params: any parameter of a measure, overriding its default)
        downstream*: [{task*: rt_sentiment, model: linear, label: rt_sentiment, options: {...}}]
        budgets: [100, 400]             # memory budgets (bits per word) to recommend for
        calibrate: {share*: 0.34, seed: 0, level: 0.9}   # downstream models on a seeded share of the
                                        # rows only; the others' disagreement is predicted

    ``kind: kg`` and ``kind: contextual`` (default ``word``) change the source and the trainer::

        kind: kg
        graph*:    {name*: umls, change: remove|add, share: 0.05, seed: 0, lost: protect|error|drop}
        training*: {algorithms*: [TransE, DistMult], dimensions*, seeds*, epochs: 50, lr: 0.01,
                    batch_size: 256, negatives: 1,
                    early_stopping: {frequency: 10, patience: 2, relative_delta: 0.01}}
                   (early_stopping: stop on the validation MRR; epochs is then the most to train)
        downstream*: [{task: link_prediction, options: {k: 10}}, {task: triple_classification}]

        kind: contextual
        corpus*:   as above
        training*: {algorithms*: [bert], dimensions*: [64, 128] (hidden sizes), seeds*, layers: 2,
                    heads: 2, steps: 200, batch_size: 32, lr: 5e-4, vocab_size: 8000, max_length: 128,
                    heldout_fraction: 0.02, sample_docs: null, layer: -1, subword: first,
                    min_count: 3, max_occurrences: 50}
                   (init: builtin:minilm_l6 continues the packaged MiniLM's pretraining instead: then
                    dimensions is [384], its hidden size, and it fixes layers, heads, tokenizer, vocab_size)
        downstream*: [{task: rt_subjectivity, model: linear|mlp, options: {limit, pooling, ...}}]

    Parameters
    ----------
    data : mapping
        The parsed YAML document.
    source : str, optional
        File name used in error messages.

    Returns
    -------
    StudySpec

    Raises
    ------
    StudyDefinitionError
        On an unknown key, a bad value or an impossible combination; the message names the key.
    """
    v = _Validator(source)
    kind = _study_kind(v, data)
    top = v.mapping(data, "", {"name": True, "description": False, "kind": False, kind.source_key: True,
                               "training": True, "compression": True, "measures": True, "downstream": True,
                               "budgets": False, "calibrate": False})
    name = v.string(top["name"], "name")
    if any(c in name for c in "/\\\0"):
        raise v.fail("name", f"must not contain path separators, got {name!r}")
    description = top.get("description", "")
    if not isinstance(description, str):
        raise v.fail("description", "must be a string")

    source_spec = kind.parse_source(v, top[kind.source_key])
    training = _training(v, kind, top["training"])

    k = v.mapping(top["compression"], "compression", {"bit_widths": True, "rounding": False, "transforms": False,
                                                      "scheme": False})
    compression = CompressionSpec(
        bit_widths=_bit_widths(v, k["bit_widths"]),
        rounding=_study_rounding(v, k.get("rounding", "nearest")),
        transforms=_transforms(v, k.get("transforms", ["none"])),
        scheme=v.string(k.get("scheme", "uniform"), "compression.scheme", SCHEMES),
    )
    if not kind.transforms and compression.transforms != ("none",):
        applies = ", ".join(k.name for k in KINDS.values() if k.transforms)
        raise v.fail("compression.transforms", f"transforms apply to {applies} studies; a {kind.name} study "
                                               "compresses with uniform quantization only")
    _check_scheme(v, kind, compression)

    m = v.mapping(top["measures"], "measures", {"names": True, "top_n": False, "params": False, **{
        legacy: False for legacy in _LEGACY_MEASURE_KEYS}})
    names = v.str_list(m["names"], "measures.names", _available_measures(kind.geometry))
    measures = MeasureSpec(names=names, top_n=v.integer(m.get("top_n", 10000), "measures.top_n", 2),
                           params=_measure_params(v, m, names))

    entries = v.sequence(top["downstream"], "downstream")
    parse_entry = _downstream_entry(v, kind)
    downstream = [parse_entry(f"downstream[{i}]", entry) for i, entry in enumerate(entries)]
    labels = tuple(d.label for d in downstream)
    for i, lab in enumerate(labels):
        if lab in labels[:i]:
            raise v.fail(f"downstream[{i}].label", f"duplicate label {lab!r}: give each (task, model) entry "
                                                   "its own label; it becomes the 'task' column of the results")

    budgets: tuple[int, ...] = ()
    # an empty list is no budget: what to_dict writes for a study without budgets reads back
    if not (top.get("budgets") is None or isinstance(top["budgets"], (list, tuple)) and not top["budgets"]):
        budgets = v.int_list(top["budgets"], "budgets", 1)

    # impossible combinations: checked after each part is valid on its own
    from embstab.measures import get_measure  # noqa: PLC0415 - the registry declares what each measure needs

    if "knn" in measures.names:
        knn_k = measures.params_dict().get("knn", {}).get("k", get_measure("knn").defaults["k"])
        if knn_k >= measures.top_n:
            raise v.fail("measures.params.knn.k", f"k = {knn_k} neighbours need more than top_n = "
                                                  f"{measures.top_n} compared words")
    # measures that see the words only through their column spans say nothing with n <= d
    rank_needing = [n for n in measures.names if get_measure(n).needs_more_words_than_dims]
    if rank_needing and measures.top_n <= max(training.dimensions):
        raise v.fail("measures.top_n", f"top_n = {measures.top_n} words cannot span the "
                                       f"{max(training.dimensions)}-dimensional embeddings that "
                                       f"{', '.join(rank_needing)} compare; use top_n > max(training.dimensions)")
    from embstab.compress.memory import memory_bits  # noqa: PLC0415 - the one formula, loaded on use

    smallest = memory_bits(min(training.dimensions), min(compression.bit_widths))
    for i, b in enumerate(budgets):
        if b < smallest:
            raise v.fail(f"budgets[{i}]", f"budget {b} bits/word is below the smallest configuration of the "
                                          f"grid ({min(training.dimensions)} dims x {min(compression.bit_widths)} "
                                          f"bits = {smallest}); nothing fits")
    spec = StudySpec(name=name, description=description, source_spec=source_spec, training=training,
                     compression=compression, measures=measures, downstream=tuple(downstream),
                     budgets=budgets, source=source, kind=kind.name, calibrate=_calibrate(v, top.get("calibrate")))
    spec.check_size()
    if kind.check is not None:
        kind.check(v, spec)
    return spec


def _calibrate(v: _Validator, value: Any) -> CalibrationSpec | None:
    """``calibrate``: the share of rows whose downstream models run, its seed and the intervals' level."""
    if value is None:  # null is no calibration, as an absent key
        return None
    c = v.mapping(value, "calibrate", {"share": True, "seed": False, "level": False})
    share = v.number(c["share"], "calibrate.share", 0.0, 1.0, open_low=True)
    seed = v.integer(c.get("seed", 0), "calibrate.seed", 0, 2**32 - 1)
    level = v.number(c.get("level", 0.9), "calibrate.level", 0.0, 1.0, open_low=True, open_high=True)
    return CalibrationSpec(share=share, seed=seed, level=level)


def _study_kind(v: _Validator, data: Any) -> StudyKind:
    """The ``kind`` key (default ``word``), read first: it decides which other keys are valid."""
    if not isinstance(data, dict):
        raise v.fail("", f"must be a mapping, got {type(data).__name__}")
    kind = KINDS[v.string(data.get("kind", "word"), "kind", tuple(KINDS))]
    for other in sorted({k.source_key for k in KINDS.values()} - {kind.source_key}):
        if other in data:
            raise v.fail(other, f"a {kind.name} study builds its pair from '{kind.source_key}', not '{other}'")
    return kind


def _training(v: _Validator, kind: StudyKind, value: Any) -> TrainingSpec:
    """The ``training`` section: the grid (algorithms, dimensions, seeds, recipes) plus the kind's own settings."""
    settings = dict(kind.training)
    t = v.mapping(value, "training", {"algorithms": True, "dimensions": True, "seeds": True,
                                      **dict.fromkeys(settings, False), "recipes": False})
    recipes = ("fp32",)
    if kind.recipes:
        recipes = _training_recipes(v, t.get("recipes", ["fp32"]))
    elif t.get("recipes") not in (None, ["fp32"], ("fp32",)):
        applies = ", ".join(k.name for k in KINDS.values() if k.recipes)
        raise v.fail("training.recipes", f"a {kind.name} study trains in fp32 only (training recipes apply to "
                                         f"{applies} studies)")
    params = {name: s.check(v, t.get(name, s.default), f"training.{name}") for name, s in settings.items()}
    # a setting added later stays out of the configuration while unset (optional) or at its default
    # (omit_default): studies written before it existed keep their fingerprints and artifacts
    params = {name: value for name, value in params.items()
              if not (settings[name].optional and value is None)
              and not (settings[name].omit_default and value == settings[name].default)}
    return TrainingSpec(algorithms=kind.algorithms(v, t["algorithms"]),
                        dimensions=v.int_list(t["dimensions"], "training.dimensions", 1, 100_000),
                        seeds=v.int_list(t["seeds"], "training.seeds", 0, 2**32 - 1),
                        recipes=recipes, params=tuple(sorted(params.items())))


def _downstream_entry(v: _Validator, kind: StudyKind):
    """Parser of one downstream entry: one of the kind's tasks, one of its models, their options."""
    rules = kind.tasks()

    def parse(key: str, entry: Any) -> DownstreamSpec:
        e = v.mapping(entry, key, {"task": True, "model": False, "label": False, "options": False})
        task = v.string(e["task"], f"{key}.task")
        if task not in rules:
            hint = did_you_mean(task, rules)
            raise v.fail(f"{key}.task", f"a {kind.name} study has no downstream task {task!r} "
                                        f"(choose from {', '.join(rules)}){hint}")
        rule = rules[task]
        model = v.string(e.get("model", rule.models[0]), f"{key}.model")
        if model not in rule.models:
            raise v.fail(f"{key}.model", f"model {model!r} cannot be used for {kind.name} task {task!r} "
                                         f"(choose from {', '.join(rule.models)})")
        label = v.string(e.get("label", task), f"{key}.label")
        options = e.get("options", {}) or {}
        if not isinstance(options, dict) or not all(isinstance(o, str) for o in options):
            raise v.fail(f"{key}.options", "must be a mapping of keyword arguments")
        # a typo here would fail every row of the entry at run time, and no re-run could fix it
        allowed = {**rule.options, **rule.model_options.get(model, {})}
        v.mapping(options, f"{key}.options", dict.fromkeys(allowed, False))
        checked = {name: allowed[name].check(v, value, f"{key}.options.{name}") for name, value in options.items()}
        _check_task_option_values(v, f"{key}.options", checked)
        return DownstreamSpec(task, model, label, tuple(sorted(checked.items())))

    return parse


def load_study(path: str | os.PathLike) -> StudySpec:
    """Read and validate a study YAML file.

    Parameters
    ----------
    path : path-like
        The study definition (YAML).

    Returns
    -------
    StudySpec

    Raises
    ------
    StudyDefinitionError
        If the file is not UTF-8 or not valid YAML, gives a key twice, nests or expands (through
        aliases) beyond the bounds of :func:`embstab._textfiles.load_yaml`, or the definition is
        invalid (the message names the key or the line).
    FileNotFoundError
        If the file does not exist.
    """
    from embstab._textfiles import load_yaml, read_utf8  # noqa: PLC0415
    from embstab.data.errors import DataFormatError  # noqa: PLC0415

    path = os.fspath(path)
    try:
        data = load_yaml(read_utf8(path), path)
    except DataFormatError as exc:
        # not UTF-8, not YAML, a duplicate key, or a document that would cost unbounded work
        where = f"line {exc.line}: " if exc.line is not None else ""
        raise StudyDefinitionError("", f"{where}{exc.problem}", path) from None
    if data is None:
        raise StudyDefinitionError("", "the file is empty", path)
    return parse_study(data, source=path)
