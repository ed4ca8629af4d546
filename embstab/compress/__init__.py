"""Embedding compression: uniform quantization with a golden-section clip, the pair protocol,
the low-precision core's formats applied per row, PCA truncation, memory accounting and the
bit-packed ``.esq`` file format (:mod:`embstab.io.compressed`).
"""

from __future__ import annotations

from embstab.compress.embedding import (CompressResult, compress_embedding, compress_like, compress_pair,
                                       quantize_embedding, save_compressed)
from embstab.compress.memory import bits_per_entry, memory_bits, memory_table
from embstab.compress.pca import truncate_dimension
from embstab.compress.transforms import TRANSFORMS, Transform, TransformError, parse_transform, transform_quantize_pair
from embstab.compress.uniform import optimal_clip, quantization_error, uniform_quantize
from embstab.compress.vectorstore import (PRECISIONS, HammingTopK, RescoredTopK, bytes_per_vector, compress_for_store,
                                          hamming_topk, quantization_ranges, quantize_embeddings, rescore,
                                          truncate_embeddings)
from embstab.io.compressed import CompressedData, read_compressed, read_compressed_data

__all__ = [
    "CompressResult", "CompressedData", "bits_per_entry", "compress_embedding", "compress_like", "compress_pair", "memory_bits", "memory_table",
    "optimal_clip", "quantization_error", "quantize_embedding", "read_compressed", "read_compressed_data",
    "save_compressed", "truncate_dimension", "uniform_quantize",
    "TRANSFORMS", "Transform", "TransformError", "parse_transform", "transform_quantize_pair",
    "PRECISIONS", "HammingTopK", "RescoredTopK", "bytes_per_vector", "compress_for_store", "hamming_topk",
    "quantization_ranges",
    "quantize_embeddings", "rescore", "truncate_embeddings",
]
