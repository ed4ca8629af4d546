"""Search at vector-store scale: brute force against embstab's exact search, faiss flat, HNSW and binary Hamming search.

Run: ``python benchmarks/bench_retrieval.py [--n 1000000] [--queries 1000] [--hnsw-n 100000] [--data clustered]``
(``pip install faiss-cpu`` for the faiss rows; without it they are skipped).

N random unit vectors (d = 384, float32, seed 0; with ``--data clustered``, unit vectors around 1,000
random topic centres) are searched by Q queries drawn the same way (seed 1) for
their k = 10 nearest by inner product, and by their binary codes (one sign bit per dimension,
packed: 48 bytes a vector) for the k nearest by Hamming distance. Every row is timed in the same
run, once (at a million vectors a row takes seconds, far above the timer's noise; the machine's
load drifts more than that), and divided by the brute-force row:

- ``numpy GEMM`` (the floor: float32 ``Q x N`` scores, 256 queries at a time, nothing selected)
  and ``numpy GEMM + argpartition`` (the baseline: the same scores, then the top k of each row);
- ``embstab exact`` (:func:`embstab.downstream.retrieval.search`, the reference: rows normalised
  in float64, scores in float64, ties broken by document index);
- ``faiss IndexFlatIP`` (raw faiss: add, then search) and ``embstab index=flat`` (the same
  through ``search``, which normalises, hands float32 rows to faiss and rescores the top k);
- ``faiss HNSW`` on the first ``--hnsw-n`` vectors only (a graph of a million vectors takes tens of
  minutes to build on two cores): build time (one thread, as embstab builds it for a deterministic
  graph) and search time at each ``--ef-search``, recall@10 against exact search of the same subset;
  their ratios are to brute force over that subset, timed in the same run. Random unit vectors have
  no clusters to exploit: the hardest case for a graph index, so its recall here is a floor, not
  what text embeddings get;
- ``embstab hamming_topk`` (:func:`embstab.compress.vectorstore.hamming_topk`, numpy) and
  ``faiss IndexBinaryFlat`` on the packed codes (their agreement checked: equal distances).

Memory: the growth of the process's peak resident set during the row (``VmHWM`` in
``/proc/self/status``, reset before each row by writing 5 to ``/proc/self/clear_refs``, after glibc's
``malloc_trim`` has returned the free heap), which sees numpy, torch and faiss allocations alike; the
input vectors and codes, allocated before, are not counted; an index's own copy of the vectors is.
Where the reset is not allowed, tracemalloc's peak (numpy's allocations only) is printed instead
and the header says so.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import platform
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

from embstab.compress.vectorstore import hamming_topk, quantize_embeddings
from embstab.downstream.retrieval import index_flips, search


def _status(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def _can_reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        return _status("VmHWM") > 0
    except OSError:
        return False


RESET_PEAK = _can_reset_peak()
_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def _trim() -> None:
    """Hand the heap's free memory back (glibc): otherwise a row can reuse what an earlier row freed but kept
    resident, and its growth would read as nothing."""
    trim = getattr(_LIBC, "malloc_trim", None)
    if trim is not None:
        trim(0)


def measure(fn: Callable[[], Any]) -> tuple[Any, float, int]:
    """Run ``fn`` once: its result, wall seconds and peak memory growth in bytes (see the module's docstring)."""
    if RESET_PEAK:
        _trim()
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        before = _status("VmRSS")
        t0 = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - t0
        return out, seconds, max(0, _status("VmHWM") - before)
    tracemalloc.start()
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, seconds, peak


def unit_rows(n: int, d: int, seed: int) -> np.ndarray:
    """``n`` random unit vectors (float32), generated and normalised a block at a time."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, d), dtype=np.float32)
    for lo in range(0, n, 65536):
        block = rng.standard_normal((min(65536, n - lo), d), dtype=np.float32)
        out[lo:lo + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def clustered_rows(n: int, d: int, seed: int, clusters: int = 1000, spread: float = 0.6) -> np.ndarray:
    """``n`` unit vectors (float32) around ``clusters`` random unit centres (the same centres for every
    seed: documents and queries share their topics), each a centre plus Gaussian noise of norm about
    ``spread``, normalised: data with neighbourhoods, as text embeddings have."""
    centres = unit_rows(clusters, d, 12345)
    rng = np.random.default_rng(seed)
    out = np.empty((n, d), dtype=np.float32)
    for lo in range(0, n, 65536):
        m = min(65536, n - lo)
        block = centres[rng.integers(0, clusters, m)] + rng.standard_normal((m, d), dtype=np.float32) * (spread / d ** 0.5)
        out[lo:lo + m] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def gemm_only(q: np.ndarray, d: np.ndarray, block: int = 256) -> None:
    """The bare scores, ``block`` queries at a time, into one reused buffer."""
    buf = np.empty((min(block, len(q)), len(d)), dtype=np.float32)
    for lo in range(0, len(q), block):
        qb = q[lo:lo + block]
        np.matmul(qb, d.T, out=buf[:len(qb)])


def brute_force(q: np.ndarray, d: np.ndarray, k: int, block: int = 256) -> np.ndarray:
    """numpy GEMM + argpartition: the k best documents of each query, the best first."""
    buf = np.empty((min(block, len(q)), len(d)), dtype=np.float32)
    top = np.empty((len(q), k), dtype=np.int64)
    for lo in range(0, len(q), block):
        qb = q[lo:lo + block]
        s = np.matmul(qb, d.T, out=buf[:len(qb)])
        part = np.argpartition(-s, k - 1, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(s, part, axis=1), axis=1, kind="stable")
        top[lo:lo + len(qb)] = np.take_along_axis(part, order, axis=1)
    return top


def same_sets(a: np.ndarray, b: np.ndarray) -> float:
    """Share of rows whose sets of indices agree."""
    return float(np.mean(np.all(np.sort(a, axis=1) == np.sort(b, axis=1), axis=1)))


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    """Mean share of the true top k found (faiss's intersection measure)."""
    return float(np.mean([np.intersect1d(f, t).size / t.size for f, t in zip(found, truth)]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="documents (default 1,000,000)")
    ap.add_argument("--d", type=int, default=384, help="dimensions (default 384)")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--hnsw-n", type=int, default=100_000, help="documents of the HNSW rows (default 100,000)")
    ap.add_argument("--hnsw-m", type=int, default=32)
    ap.add_argument("--ef-construction", type=int, default=40)
    ap.add_argument("--ef-search", type=int, nargs="+", default=[64, 256, 1024],
                    help="HNSW candidate lists searched, one row each (default 64 256 1024; embstab's default: 64)")
    ap.add_argument("--threads", type=int, default=2, help="faiss and torch threads (numpy's BLAS: its own)")
    ap.add_argument("--data", choices=["random", "clustered"], default="random",
                    help="random unit vectors (default; no neighbourhoods: the hardest case for HNSW and IVF) or "
                         "clustered ones (1,000 topics, as text embeddings have neighbourhoods)")
    ap.add_argument("--skip-embstab-exact", action="store_true", help="leave out embstab's exact search")
    args = ap.parse_args()
    try:
        import faiss  # noqa: PLC0415
    except ImportError:
        faiss = None
    import torch  # noqa: PLC0415

    torch.set_num_threads(args.threads)
    if faiss is not None:
        faiss.omp_set_num_threads(args.threads)
    n, d, k = args.n, args.d, args.k
    hnsw_n = min(args.hnsw_n, n)
    t0 = time.perf_counter()
    make = clustered_rows if args.data == "clustered" else unit_rows
    docs = make(n, d, 0)
    queries = make(args.queries, d, 1)
    doc_codes, query_codes = quantize_embeddings(docs, "ubinary"), quantize_embeddings(queries, "ubinary")
    made = time.perf_counter() - t0

    print(f"# {time.strftime('%a %b %d %H:%M:%S %Z %Y')}  load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"# {platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}, torch {torch.__version__}, "
          f"faiss {getattr(faiss, '__version__', 'not installed')}, {args.threads} faiss/torch threads")
    print(f"# {args.data} data: {n:,} documents x {d} dims float32 ({docs.nbytes / 2**30:.2f} GiB; codes {doc_codes.nbytes / 2**20:.0f} "
          f"MiB), {args.queries:,} queries, k = {k}; data made in {made:.1f} s; each row run once")
    print("# memory: " + ("peak RSS growth during the row (VmHWM reset through /proc/self/clear_refs)" if RESET_PEAK
                          else "tracemalloc peak (numpy's allocations only: faiss and torch not seen)"))
    rows: list[tuple[str, float, int, float, str]] = []  # label, seconds, bytes, baseline seconds, note

    _, t_gemm, m_gemm = measure(lambda: gemm_only(queries, docs))
    truth, t_brute, m_brute = measure(lambda: brute_force(queries, docs, k))
    rows.append(("numpy GEMM (floor)", t_gemm, m_gemm, t_brute, ""))
    rows.append(("numpy GEMM + argpartition (baseline)", t_brute, m_brute, t_brute, ""))

    exact = None
    if not args.skip_embstab_exact:
        exact, t, m = measure(lambda: search(queries, docs, k))
        rows.append(("embstab exact search", t, m, t_brute,
                     f"same top-{k} set as brute force: {same_sets(exact.top_k, truth):.1%} of queries"))
    if faiss is not None:
        def faiss_flat() -> np.ndarray:
            index = faiss.IndexFlatIP(d)
            index.add(docs)
            return index.search(queries, k)[1]

        top, t, m = measure(faiss_flat)
        rows.append(("faiss IndexFlatIP (add + search)", t, m, t_brute,
                     f"same top-{k} set as brute force: {same_sets(top, truth):.1%}"))
        flat, t, m = measure(lambda: search(queries, docs, k, index="flat"))
        note = f"same top-{k} set as brute force: {same_sets(flat.top_k, truth):.1%}"
        if exact is not None:
            own = index_flips(exact, flat)
            note += f"; own flips vs exact (tie-aware): {own.flipped}"
        rows.append(("embstab search index=flat", t, m, t_brute, note))

        sub = docs[:hnsw_n]
        sub_truth, t_sub, m_sub = measure(lambda: brute_force(queries, sub, k))
        rows.append((f"numpy GEMM + argpartition, first {hnsw_n:,}", t_sub, m_sub, t_brute, "the HNSW rows' baseline"))

        def build() -> Any:
            index = faiss.IndexHNSWFlat(d, args.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = args.ef_construction
            faiss.omp_set_num_threads(1)  # as embstab builds it: one thread, one graph for the same vectors
            try:
                index.add(sub)
            finally:
                faiss.omp_set_num_threads(args.threads)
            return index

        hnsw, t_build, m_build = measure(build)
        rows.append((f"faiss HNSW build, first {hnsw_n:,} (1 thread)", t_build, m_build, t_sub,
                     f"M {args.hnsw_m}, efConstruction {args.ef_construction} (ratio: to the subset's brute force)"))
        for ef in args.ef_search:
            hnsw.hnsw.efSearch = max(ef, k)
            top, t, m = measure(lambda: hnsw.search(queries, k)[1])
            rows.append((f"faiss HNSW search efSearch {ef}, first {hnsw_n:,}", t, m, t_sub,
                         f"recall@{k} vs exact {recall(top, sub_truth):.3f} (ratio: to the subset's brute force)"))
        del hnsw

    ref, t_ham, m = measure(lambda: hamming_topk(query_codes, doc_codes, k))
    rows.append(("embstab hamming_topk (binary codes)", t_ham, m, t_brute, ""))
    if faiss is not None:
        def faiss_binary() -> tuple[np.ndarray, np.ndarray]:
            index = faiss.IndexBinaryFlat(d)
            index.add(doc_codes)
            return index.search(query_codes, k)

        (dist, _), t, m = measure(faiss_binary)
        agree = bool(np.array_equal(np.sort(dist, axis=1), ref.distances))
        rows.append(("faiss IndexBinaryFlat (add + search)", t, m, t_brute,
                     f"distances equal hamming_topk's: {agree}; {t_ham / t:.1f}x faster than hamming_topk"))
    else:
        print("# faiss not installed (pip install faiss-cpu): its rows are skipped")

    print(f"{'method':<48} {'wall s':>8} {'peak MiB':>9} {'x brute force':>13}  note")
    for label, seconds, nbytes, base, note in rows:
        print(f"{label:<48} {seconds:8.2f} {nbytes / 2**20:9.0f} {seconds / base:12.2f}x  {note}")


if __name__ == "__main__":
    main()
