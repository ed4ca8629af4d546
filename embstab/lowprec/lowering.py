"""Put a quantizer after every layer of chosen kinds in a torch model ("lowering", as QPyTorch calls it).

QPyTorch's ``sequential_lower`` deep-copies a model and wraps each matching leaf module as
``Sequential(module, quantizer)``, so activations are rounded on the way forward and their
gradients (through the quantizer's backward format) on the way back. :func:`lower` does the
same with embstab's :class:`~embstab.lowprec.Quantizer`, by layer groups or by module classes.
Recurrent layers return tuples, which a quantizer cannot follow; they are refused by name rather
than silently skipped.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from torch import nn

from embstab.errors import ConfigError
from embstab.lowprec.autograd import Quantizer

__all__ = ["LAYER_GROUPS", "lower"]

#: Layer groups of QPyTorch's ``lower`` and the module classes each covers.
LAYER_GROUPS: dict[str, tuple[type[nn.Module], ...]] = {
    "conv": (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d),
    "linear": (nn.Linear, nn.Bilinear),
    "pool": (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d,
             nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d, nn.AdaptiveAvgPool1d,
             nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d),
    "pad": (nn.ConstantPad1d, nn.ConstantPad2d, nn.ConstantPad3d, nn.ReflectionPad1d, nn.ReflectionPad2d,
            nn.ReplicationPad1d, nn.ReplicationPad2d, nn.ReplicationPad3d, nn.ZeroPad2d),
    "activation": (nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.PReLU, nn.ELU, nn.SELU, nn.CELU, nn.GELU, nn.SiLU,
                   nn.Mish, nn.Sigmoid, nn.Tanh, nn.Hardtanh, nn.Hardswish, nn.Hardsigmoid, nn.Softplus,
                   nn.Softmax, nn.LogSoftmax),
    "normalization": (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.LayerNorm, nn.GroupNorm,
                      nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d, nn.LocalResponseNorm),
    "dropout": (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout),
    "loss": (nn.modules.loss._Loss,),
}

_RECURRENT = (nn.RNNBase, nn.RNNCellBase)


def lower(model: nn.Module, quantizer: Quantizer,
          layer_types: Iterable[str | type[nn.Module]] = ("conv", "linear"),
          *, inplace: bool = False) -> nn.Module:
    """Wrap every leaf module of the given kinds as ``nn.Sequential(module, quantizer)``.

    Parameters
    ----------
    model : torch.nn.Module
        The model (left untouched unless ``inplace``).
    quantizer : Quantizer
        Applied after each matching module; one instance is shared, so its stochastic rounding
        draws from one generator in execution order (deterministic under its seed).
    layer_types : iterable of str or module classes, default ("conv", "linear")
        Group names from :data:`LAYER_GROUPS` and/or ``nn.Module`` subclasses.
    inplace : bool, default False
        Modify ``model`` itself instead of a deep copy.

    Returns
    -------
    torch.nn.Module
        The lowered model; ``lowered.lowered_modules`` lists the qualified names wrapped.

    Raises
    ------
    ValueError
        For an unknown group, an empty selection, a recurrent layer type (its output is a tuple),
        or when no module of the model matches.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(quantizer, Quantizer):
        raise TypeError(f"quantizer must be an embstab.lowprec.Quantizer, got {type(quantizer).__name__}")
    classes = _classes(layer_types)
    target = model if inplace else copy.deepcopy(model)
    wrapped: list[str] = []
    position = {n: i for i, (n, _) in enumerate(target.named_modules())}
    already = 0
    for name, parent in list(target.named_modules()):
        if _is_wrapper(parent):
            already += isinstance(parent[0], classes)  # lowered before: not wrapped twice
            continue
        for child_name, child in list(parent.named_children()):
            if isinstance(child, Quantizer) or _is_wrapper(child):
                continue
            if isinstance(child, classes) and not list(child.children()):
                if isinstance(child, _RECURRENT):
                    raise ConfigError(f"{_qualified(name, child_name)} is recurrent ({type(child).__name__}): "
                                     "its output is a tuple a quantizer cannot follow")
                setattr(parent, child_name, nn.Sequential(child, quantizer))
                wrapped.append(_qualified(name, child_name))
    if not wrapped and not already:
        kinds = ", ".join(sorted({c.__name__ for c in classes}))
        raise ConfigError(f"no layer of the model is one of: {kinds}")
    target.lowered_modules = sorted(wrapped, key=position.__getitem__)  # the model's own order
    return target


def _classes(layer_types: Iterable[str | type[nn.Module]]) -> tuple[type[nn.Module], ...]:
    if isinstance(layer_types, (str, type)):
        layer_types = [layer_types]
    out: list[type[nn.Module]] = []
    for item in layer_types:
        if isinstance(item, str):
            if item not in LAYER_GROUPS:
                raise ConfigError(f"unknown layer group {item!r}; expected one of {', '.join(LAYER_GROUPS)} "
                                 "or nn.Module classes")
            out.extend(LAYER_GROUPS[item])
        elif isinstance(item, type) and issubclass(item, nn.Module):
            if issubclass(item, _RECURRENT):
                raise ConfigError(f"{item.__name__} is recurrent: its output is a tuple a quantizer cannot follow")
            out.append(item)
        else:
            raise ConfigError(f"layer types must be group names or nn.Module classes, got {item!r}")
    if not out:
        raise ConfigError("layer_types is empty")
    return tuple(out)


def _is_wrapper(module: nn.Module) -> bool:
    """A ``Sequential(layer, Quantizer)`` as this function makes: never wrapped twice."""
    return isinstance(module, nn.Sequential) and len(module) == 2 and isinstance(module[1], Quantizer)


def _qualified(parent: str, child: str) -> str:
    return f"{parent}.{child}" if parent else child

