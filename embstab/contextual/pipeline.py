"""The sentence pipeline a model folder declares: length limit, pooling and normalisation.

A sentence-transformers folder says how its users turn a text into one vector: ``modules.json``
lists the modules (a Transformer, a Pooling, often a Normalize), ``sentence_bert_config.json``
gives the length limit (``max_seq_length``, texts are truncated to it) and the Pooling module's
``config.json`` the pooling mode. :func:`embstab.contextual.sentence_features` follows it by
default, so embstab's sentence vectors are the ones ``SentenceTransformer.encode()`` gives.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from embstab._numbers import is_integer
from embstab.data.errors import DataFormatError
from embstab.errors import ConfigError
from embstab.io.modelfolder import component, read_json_file

__all__ = ["POOLINGS", "SentencePipeline", "read_sentence_pipeline"]

#: Pooling modes: mean of the token states (``[CLS]``/``[SEP]`` included), the ``[CLS]`` state,
#: the element-wise max, and the sum divided by the square root of the length.
POOLINGS = ("mean", "cls", "max", "mean_sqrt_len")

# sentence-transformers' Pooling config key → embstab's name
_MODES = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max",
          "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len"}
_TRANSFORMER, _POOLING, _NORMALIZE = ("sentence_transformers.models.Transformer",
                                      "sentence_transformers.models.Pooling",
                                      "sentence_transformers.models.Normalize")


@dataclass(frozen=True)
class SentencePipeline:
    """How a model turns a text into one vector.

    Attributes
    ----------
    pooling : str
        One of :data:`POOLINGS`.
    normalize : bool
        Scale each vector to unit length.
    max_length : int or None
        Word pieces kept per text (``[CLS]``/``[SEP]`` included); longer texts are truncated.
        None: the model's position limit, and a longer text is an error.
    source : str
        Where the pipeline comes from (``"sentence-transformers modules.json"``, ``"embstab default"``).
    """

    pooling: str = "mean"
    normalize: bool = False
    max_length: int | None = None
    source: str = "embstab default"

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            raise ConfigError(f"pooling must be one of {', '.join(POOLINGS)}, got {self.pooling!r}")
        if self.max_length is not None and (isinstance(self.max_length, bool) or not isinstance(self.max_length, int)
                                            or self.max_length < 3):
            raise ConfigError(f"max_length must be an integer of at least 3, got {self.max_length!r}")

    def to_dict(self) -> dict[str, Any]:
        """The pipeline as JSON-ready values (kept in a saved model's ``embstab.json``).

        Returns
        -------
        dict
            ``pooling``, ``normalize``, ``max_length`` and ``source``.
        """
        return asdict(self)


def read_sentence_pipeline(folder: str | Path) -> SentencePipeline | None:
    """The pipeline a sentence-transformers folder declares, or None for a folder that declares none.

    Parameters
    ----------
    folder : str or pathlib.Path
        A model folder.

    Returns
    -------
    SentencePipeline or None

    Raises
    ------
    DataFormatError
        If ``modules.json`` or a module's configuration is malformed, or declares a module or a
        pooling mode embstab cannot follow (its vectors would not be the model's).
    """
    folder = Path(folder)
    path = folder / "modules.json"
    if not path.exists():
        return None
    modules = read_json_file(component(folder, "modules.json", "sentence-transformers module list"),
                             "sentence-transformers module list")
    if not isinstance(modules, list) or not all(isinstance(m, dict) and isinstance(m.get("type"), str)
                                                for m in modules):
        raise DataFormatError(path, "not a list of modules with a 'type' each")
    kinds = [m["type"] for m in modules]
    if not kinds or kinds[0] != _TRANSFORMER:
        raise DataFormatError(path, f"the first module is {kinds[0] if kinds else 'missing'}, not a Transformer")
    unknown = [k for k in kinds[1:] if k not in (_POOLING, _NORMALIZE)]
    if unknown:
        raise DataFormatError(path, f"module {unknown[0]} is not one embstab can follow (Pooling, Normalize); its "
                                    "sentence vectors would not be the model's")
    pooling = "mean"
    for module in modules:
        if module["type"] == _POOLING:
            pooling = _pooling_mode(folder, module)
    max_length = None
    config_path = folder / "sentence_bert_config.json"
    if config_path.exists():
        config = read_json_file(component(folder, config_path.name, "sentence-transformers configuration"),
                                "sentence-transformers configuration")
        value = config.get("max_seq_length") if isinstance(config, dict) else None
        if value is not None:
            if not is_integer(value) or value < 3:
                raise DataFormatError(config_path, f"max_seq_length must be an integer of at least 3, got {value!r}")
            max_length = value
    return SentencePipeline(pooling, _NORMALIZE in kinds, max_length, "sentence-transformers modules.json")


def _pooling_mode(folder: Path, module: dict) -> str:
    sub = module.get("path") or ""
    if not isinstance(sub, str) or "/" in sub.strip("/") or sub.startswith((".", "/")) or "\\" in sub:
        raise DataFormatError(folder / "modules.json", f"pooling module path {sub!r} is not a sub-folder name")
    path = folder / sub.strip("/") / "config.json"
    config = read_json_file(component(folder, f"{sub.strip('/')}/config.json", "pooling configuration"),
                            "pooling configuration")
    if not isinstance(config, dict):
        raise DataFormatError(path, "not a JSON object")
    chosen = [name for key, name in _MODES.items() if config.get(key) is True]
    others = [k for k, v in config.items() if k.startswith("pooling_mode_") and k not in _MODES and v is True]
    if others or len(chosen) != 1:
        raise DataFormatError(path, f"pooling {', '.join(chosen + others) or 'none'}: embstab follows exactly one "
                                    f"of {', '.join(POOLINGS)}")
    return chosen[0]
