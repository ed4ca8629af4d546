"""A contextual model: a BERT masked-LM, its WordPiece tokenizer, and how to save and load them.

:class:`ContextualModel` is what pretraining returns, what the packaged MiniLM loads as, and what
feature extraction takes. The network is always a ``transformers`` ``BertForMaskedLM`` (features
come from its encoder, ``.bert``), so one model can be pretrained, fine-tuned, quantized and read
out the same way whatever its origin.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from embstab._fs import atomic_write
from embstab._numbers import is_integer
from embstab.contextual.pipeline import SentencePipeline, read_sentence_pipeline
from embstab.contextual.tokenizer import load_tokenizer
from embstab.contextual.weights import (
    WeightSet,
    layers_held,
    load_tensors,
    match_to_network,
    read_json_file,
    read_weight_set,
)
from embstab.data.errors import DataFormatError
from embstab.errors import ConfigError, EmbstabError, lookup
from embstab.io.modelfolder import component

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["SIZES", "ModelSize", "ContextualModel", "build_model", "load_model_dir"]


@dataclass(frozen=True)
class ModelSize:
    """Shape of a BERT encoder: layers, hidden size, attention heads, feed-forward size."""

    layers: int
    hidden: int
    heads: int
    intermediate: int

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "intermediate"):
            value = getattr(self, name)
            if not is_integer(value) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.hidden % self.heads:
            raise ConfigError(f"hidden size {self.hidden} is not a multiple of the {self.heads} heads")


#: Named sizes. ``tiny`` is for CI (seconds per hundred steps on 2 cores); ``small`` is the laptop
#: tier; ``minilm`` has the shape of the packaged all-MiniLM-L6-v2 (6 × 384, 12 heads).
SIZES: dict[str, ModelSize] = {
    "tiny": ModelSize(2, 128, 2, 512),
    "small": ModelSize(4, 256, 4, 1024),
    "minilm": ModelSize(6, 384, 12, 1536),
}


def _transformers():
    # transformers takes seconds to import; only the functions that build or run a network need it
    from embstab.contextual._deps import require

    return require("transformers")


@dataclass
class ContextualModel:
    """A BERT masked-LM with its tokenizer.

    Attributes
    ----------
    network : transformers.BertForMaskedLM
        The network (kept in eval mode outside training).
    tokenizer : tokenizers.Tokenizer
        Without padding, truncation or post-processing: embstab adds ``[CLS]``/``[SEP]`` itself.
    name : str
        Short name shown in tables and used as the name of extracted embeddings.
    metadata : dict
        How it was made (size, seed, corpus, steps, quantization ...).
    """

    network: Any
    tokenizer: Tokenizer
    name: str = "bert"
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [t for t in ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]") if self.tokenizer.token_to_id(t) is None]
        if missing:
            raise EmbstabError(f"tokenizer of model {self.name!r} lacks the special tokens {', '.join(missing)}")
        vocab = self.tokenizer.get_vocab_size()
        if vocab > self.network.config.vocab_size:
            raise EmbstabError(f"tokenizer of model {self.name!r} has {vocab} pieces but the network only "
                               f"{self.network.config.vocab_size} embedding rows")

    @property
    def sentence_pipeline(self) -> SentencePipeline:
        """How this model turns a text into one vector: the pipeline its folder declared (kept in
        ``metadata["sentence_pipeline"]``), or mean pooling without normalisation."""
        declared = self.metadata.get("sentence_pipeline")
        return SentencePipeline(**declared) if isinstance(declared, dict) else SentencePipeline()

    @property
    def max_length(self) -> int:
        """Most word pieces one input may have, ``[CLS]`` and ``[SEP]`` included."""
        return int(self.network.config.max_position_embeddings)

    @property
    def n_layers(self) -> int:
        """Number of transformer layers (hidden states are numbered 0 = embeddings … ``n_layers``)."""
        return int(self.network.config.num_hidden_layers)

    @property
    def hidden_size(self) -> int:
        return int(self.network.config.hidden_size)

    def special_id(self, token: str) -> int:
        """The id of a special token such as ``"[CLS]"``.

        Parameters
        ----------
        token : str
            ``"[PAD]"``, ``"[UNK]"``, ``"[CLS]"``, ``"[SEP]"`` or ``"[MASK]"``.

        Returns
        -------
        int
        """
        return int(self.tokenizer.token_to_id(token))

    def n_parameters(self) -> int:
        """Number of parameters of the network (tied weights counted once).

        Returns
        -------
        int
        """
        return sum(p.numel() for p in self.network.parameters())

    def save(self, path: str | os.PathLike) -> None:
        """Write ``config.json``, ``model.safetensors``, ``tokenizer.json`` and ``embstab.json`` into a folder.

        Each file is written atomically; the folder is created if needed. :func:`load_model_dir`
        (and :func:`embstab.contextual.load_model`) reads it back.

        Parameters
        ----------
        path : str or os.PathLike
            The folder.
        """
        from safetensors.torch import save

        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().contiguous().clone() for k, v in self.network.state_dict().items()}
        # tied weights (decoder = word embeddings) are stored once; loading ties them again
        state.pop("cls.predictions.decoder.weight", None)
        with atomic_write(folder / "model.safetensors") as f:
            f.write(save(state))
        with atomic_write(folder / "config.json", "w") as f:
            f.write(self.network.config.to_json_string())
        with atomic_write(folder / "tokenizer.json", "w") as f:
            f.write(self.tokenizer.to_str())
        with atomic_write(folder / "embstab.json", "w") as f:
            json.dump({"name": self.name, "metadata": self.metadata}, f, indent=1, default=str)


def build_model(size: str | ModelSize, tokenizer: Tokenizer, seed: int = 0, *, max_length: int = 128,
                dropout: float = 0.1, name: str | None = None) -> ContextualModel:
    """A freshly initialised BERT masked-LM for ``tokenizer``, identical for identical arguments.

    Parameters
    ----------
    size : str or ModelSize
        A key of :data:`SIZES` or an explicit shape.
    tokenizer : tokenizers.Tokenizer
        Its vocabulary fixes the embedding table; it must have the BERT special tokens.
    seed : int
        Seed of the initialisation (the caller's global torch RNG is left untouched).
    max_length : int
        Position limit (longest input in word pieces).
    dropout : float
        Dropout of hidden states and attention.
    name : str, optional

    Returns
    -------
    ContextualModel
    """
    shape = lookup(SIZES, size, "model size") if isinstance(size, str) else size
    if max_length < 3:
        raise ConfigError(f"max_length must be at least 3 ([CLS] piece [SEP]), got {max_length}")
    if not 0.0 <= dropout < 1.0:
        raise ConfigError(f"dropout must be in [0, 1), got {dropout}")
    tf = _transformers()
    pad = tokenizer.token_to_id("[PAD]")
    config = tf.BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=shape.hidden,
                           num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                           intermediate_size=shape.intermediate, max_position_embeddings=max_length,
                           hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
                           pad_token_id=0 if pad is None else pad)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        network = tf.BertForMaskedLM(config)
    network.eval()
    label = size if isinstance(size, str) else f"{shape.layers}x{shape.hidden}"
    return ContextualModel(network, tokenizer, name or f"bert-{label}-s{seed}",
                           {"size": label, "layers": shape.layers, "hidden": shape.hidden, "heads": shape.heads,
                            "init_seed": int(seed), "max_length": max_length})


#: BERT configuration fields that size the network, with transformers' defaults for an absent field.
_SIZE_FIELDS = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                "intermediate_size": 3072, "max_position_embeddings": 512, "type_vocab_size": 2}
# (field, tensor, axis): the weights fix these sizes, so a configuration cannot ask for more than they hold
_SIZE_TENSORS = [("vocab_size", "embeddings.word_embeddings.weight", 0),
                 ("hidden_size", "embeddings.word_embeddings.weight", 1),
                 ("max_position_embeddings", "embeddings.position_embeddings.weight", 0),
                 ("type_vocab_size", "embeddings.token_type_embeddings.weight", 0),
                 ("intermediate_size", "encoder.layer.0.intermediate.dense.weight", 0)]


def _check_config(settings: object, path: Path, weights: WeightSet) -> None:
    # every size a configuration gives must be one the weights hold: a small config.json cannot make
    # the loader build (and allocate) a network larger than the files beside it
    if not isinstance(settings, dict):
        raise DataFormatError(path, "model configuration is not a JSON object")
    kind = settings.get("model_type", "bert")
    if kind != "bert":
        raise DataFormatError(path, f"model_type is {kind!r}; embstab reads BERT encoders (model_type 'bert') only")
    sizes = {}
    for key, default in _SIZE_FIELDS.items():
        value = settings.get(key, default)
        if not is_integer(value) or value < 1:
            raise DataFormatError(path, f"{key} must be a positive integer, got {value!r}")
        sizes[key] = value
    if sizes["hidden_size"] % sizes["num_attention_heads"]:
        raise DataFormatError(path, f"hidden_size {sizes['hidden_size']} is not a multiple of num_attention_heads "
                                    f"{sizes['num_attention_heads']}")
    shapes = {(n if n.startswith("bert.") else "bert." + n): e.shape for n, e in weights.tensors.items()}
    held = layers_held(shapes, "bert.")
    if sizes["num_hidden_layers"] != held:
        raise DataFormatError(path, f"num_hidden_layers is {sizes['num_hidden_layers']} but the weights hold {held} "
                                    "layers; the configuration and the weights do not match")
    for key, tensor, axis in _SIZE_TENSORS:
        shape = shapes.get("bert." + tensor)
        if shape is not None and (len(shape) != 2 or shape[axis] != sizes[key]):
            raise DataFormatError(path, f"{key} is {sizes[key]} but the weights' {tensor} has shape {shape}; the "
                                        "configuration and the weights do not match")


def load_model_dir(path: str | os.PathLike, name: str | None = None) -> ContextualModel:
    """Load a model folder (written by :meth:`ContextualModel.save`, or any BERT checkpoint folder).

    Only files inside the folder are read and nothing is fetched. The weights are the folder's
    safetensors files, each header checked before a tensor is read, and the configuration must
    describe exactly the network the weights hold: every encoder tensor present with the
    configuration's shape. Only a missing masked-LM head is initialised (seeded).

    Parameters
    ----------
    path : str or os.PathLike
        A folder with ``config.json``, ``model.safetensors`` (or ``model.safetensors.index.json``
        and its shards) and ``tokenizer.json``. Pickle weights (``pytorch_model.bin``) are never
        read: unpickling can run code stored in the file.
    name : str, optional
        Defaults to the saved name, or the folder's name.

    Returns
    -------
    ContextualModel

    Raises
    ------
    FileNotFoundError
        If the folder or one of its files is missing.
    UnsafeWeightsError
        If the folder's only weights are pickle files, or a shard is not a safetensors file inside
        the folder.
    DataFormatError
        If a file is malformed, the configuration is not BERT's, or the weights are incomplete or
        do not match the configuration.
    """
    folder = Path(path)
    for needed in ("config.json", "tokenizer.json"):
        if not os.path.lexists(folder / needed):
            raise FileNotFoundError(2, f"no {needed} in the model folder", str(folder / needed))
    weights = read_weight_set(folder)  # refuses pickles, paths out of the folder, malformed headers
    config_path = component(folder, "config.json", "model configuration")
    settings = read_json_file(config_path, "model configuration")
    _check_config(settings, config_path, weights)
    info = {}
    if os.path.lexists(folder / "embstab.json"):
        record = component(folder, "embstab.json", "embstab model record")
        info = read_json_file(record, "embstab model record")
        if not isinstance(info, dict):
            info = {}
        # the record is written by save(); one edited by hand must not end in a traceback below
        for key, kind, what in (("metadata", dict, "a JSON object"), ("name", str, "a string")):
            if info.get(key) is not None and not isinstance(info[key], kind):
                raise DataFormatError(record, f"key {key!r} must be {what}, got {type(info[key]).__name__} "
                                              f"{json.dumps(info[key])[:60]}")
    tf = _transformers()
    verbosity = tf.logging.get_verbosity()
    tf.logging.set_verbosity_error()  # library chatter about the configuration is not news to the user
    try:
        config = tf.BertConfig.from_dict(settings)
        with torch.device("meta"):  # shapes only: a configuration is checked before memory is spent on it
            shapes = {k: tuple(v.shape) for k, v in tf.BertForMaskedLM(config).state_dict().items()}
        names = match_to_network(weights, shapes, "bert.", config_path)
        with torch.random.fork_rng(devices=[]):
            # a missing MLM head is initialised; seed it so two loads of one folder are identical
            torch.manual_seed(0)
            network = tf.BertForMaskedLM(config)
    finally:
        tf.logging.set_verbosity(verbosity)
    network.load_state_dict(load_tensors(weights, names), strict=False)
    network.tie_weights()
    network.eval()
    metadata = dict(info.get("metadata") or {}, path=str(folder))
    pipeline = read_sentence_pipeline(folder)  # a sentence-transformers folder's own modules win
    if pipeline is not None:
        metadata["sentence_pipeline"] = pipeline.to_dict()
    return ContextualModel(network, load_tokenizer(folder), name or info.get("name") or folder.name, metadata)
