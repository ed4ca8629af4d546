"""Hostile inputs to the newer surfaces (study files, knowledge graphs, hyperbolic and contextual
models, embedding files): every one exits 2 with exactly one stderr line naming the file, line,
key or flag, leaves its inputs as they were, and is refused before the work it asks for.

Categories: small files that would cost unbounded work (alias nests, deep nesting, row grids,
huge sizes), silent misreadings (line splitting, control characters, duplicate keys), and
mistakes that used to end in a traceback. Cases that need a memory limit to be meaningful run in
a subprocess under ``RLIMIT_AS``.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import embstab
import embstab.cli as cli

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1

# ----------------------------------------------------------------------------- study files
WORD = ("name: hostile\ncorpus: {name: gensim_lee}\n"
        "training: {algorithms: [w2v_cbow], dimensions: [10], seeds: [1]}\n"
        "compression: {bit_widths: [1]}\nmeasures: {names: [knn]}\n")
DOWN = "downstream:\n  - {task: rt_sentiment, model: linear}\n"


def _laughs(levels: int = 9, fan: int = 10, indent: str = "") -> str:
    """A billion-laughs nest as mapping entries: each level lists the previous one ``fan`` times."""
    out = f"{indent}l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    for i in range(1, levels):
        out += f"{indent}l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * fan) + "]\n"
    return out


def _laughs_value(levels: int = 9, fan: int = 10) -> str:
    """The same nest as one flow list, so that it can be the value of an option a study accepts."""
    items = ["&l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    items += [f"&l{i} [" + ", ".join([f"*l{i - 1}"] * fan) + "]" for i in range(1, levels)]
    return "[" + ", ".join(items) + "]"


def _study_files(d: Path) -> None:
    w = lambda name, text: (d / name).write_text(text, encoding="utf-8")  # noqa: E731
    # alias expansion: a 2 KB file that serialises to gigabytes
    # the model's own options are checked by the model when it runs: this file passed validation
    w("laughs_options.yaml", WORD + "downstream:\n  - task: rt_sentiment\n    model: mlp\n    options:\n"
      + f"      hidden: {_laughs_value()}\n")
    w("laughs_params.yaml", WORD.replace("measures: {names: [knn]}\n", "measures:\n  names: [knn]\n  params:\n"
                                         "    knn:\n" + _laughs(indent="      ")) + DOWN)
    w("laughs_top.yaml", _laughs() + WORD + DOWN)
    merges = "m0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8}\n"
    for i in range(1, 10):
        merges += f"m{i}: &m{i} {{<<: [" + ", ".join([f"*m{i - 1}"] * 10) + "]}\n"
    w("laughs_merge.yaml", merges + WORD + DOWN)
    w("long_scalar.yaml", WORD + "downstream:\n  - task: rt_sentiment\n    model: mlp\n    options:\n"
      + "      dropout: [&big " + "x" * 200_000 + ", " + ", ".join(["*big"] * 20) + "]\n")
    w("recursive_list.yaml", "loop: &a [1, *a]\n" + WORD + DOWN)
    w("recursive_map.yaml", "loop: &m {x: 1, y: *m}\n" + WORD + DOWN)
    # nesting that ended in RecursionError
    w("deep_flow_list.yaml", "x: " + "[" * 3000 + "]" * 3000 + "\n" + WORD + DOWN)
    w("deep_flow_map.yaml", "x: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n" + WORD + DOWN)
    w("deep_block.yaml", "".join("  " * i + f"k{i}:\n" for i in range(150)) + "  " * 150 + "leaf: 1\n")
    w("deep_mixed.yaml", WORD + "downstream:\n  - task: rt_sentiment\n    options: {hidden: "
      + "[" * 2000 + "]" * 2000 + "}\n")
    # duplicate keys: the later one silently won
    w("dup_training.yaml", WORD + DOWN + "training: {algorithms: [w2v_sg], dimensions: [99], seeds: [7]}\n")
    w("dup_nested.yaml", WORD.replace("seeds: [1]}", "seeds: [1], dimensions: [20]}") + DOWN)
    w("dup_flow.yaml", WORD + "downstream:\n  - {task: rt_sentiment, task: rt_subjectivity}\n")
    w("dup_options.yaml", WORD + "downstream:\n  - {task: rt_sentiment, options: {limit: 5, limit: 50}}\n")
    w("dup_quoted.yaml", WORD + DOWN + '"name": other\n')
    w("dup_corpus.yaml", WORD.replace("corpus: {name: gensim_lee}", "corpus: {name: gensim_lee, name: brown}") + DOWN)
    w("dup_block.yaml", "name: a\n" + WORD.replace("name: hostile\n", "") + DOWN + "name: b\n")
    # not UTF-8
    (d / "latin1.yaml").write_bytes((WORD + DOWN).encode() + "description: caf\xe9\n".encode("latin-1"))
    (d / "ff_byte.yaml").write_bytes(b"\xff" + (WORD + DOWN).encode())
    (d / "bad_comment.yaml").write_bytes((WORD + DOWN).encode() + b"# \xc3\x28 broken\n")
    (d / "truncated_utf8.yaml").write_bytes((WORD + DOWN).encode() + b"description: \xe2\x82")
    # rows that multiply past any machine
    sweep = ("name: kg_sweep\nkind: kg\ngraph: {name: nations}\n"
             f"training: {{algorithms: [TransE, DistMult, ComplEx, RotatE], dimensions: {list(range(1, 1001))}, "
             f"seeds: {list(range(1000))}}}\ncompression: {{bit_widths: {[*range(1, 17), 32]}}}\n"
             "measures: {names: [knn], top_n: 14}\ndownstream:\n  - {task: link_prediction}\n")
    w("kg_sweep.yaml", sweep)
    w("ocs_sweep.yaml", WORD.replace("compression: {bit_widths: [1]}", "compression: {bit_widths: [1, 2, 4, 8], "
                                     "transforms: [" + ", ".join(f'"ocs:{i / 6001:.8f}"' for i in range(1, 6001))
                                     + "]}") + DOWN)
    w("seed_sweep.yaml", WORD.replace("seeds: [1]", f"seeds: {list(range(2001))}")
      .replace("bit_widths: [1]", f"bit_widths: {list(range(1, 12))}") + DOWN)
    w("grid_sweep.yaml", WORD.replace("dimensions: [10]", f"dimensions: {list(range(1, 101))}")
      .replace("seeds: [1]", f"seeds: {list(range(101))}").replace("bit_widths: [1]", "bit_widths: [1, 2]") + DOWN)
    # transform parameters that are not finite numbers
    for name, spec in (("tt_inf", "tt:inf"), ("tt_nan", "tt:nan"), ("tt_neg_inf", "tt:-inf"), ("tt_1e400", "tt:1e400"),
                       ("ocs_inf", "ocs:inf"), ("ocs_nan", "ocs:nan")):
        w(f"{name}.yaml", WORD.replace("bit_widths: [1]}", f'bit_widths: [1], transforms: ["{spec}"]}}') + DOWN)
    w("dim_word.yaml", WORD.replace("dimensions: [10]", 'dimensions: ["four"]') + DOWN)


# ----------------------------------------------------------------------------- knowledge graphs
TRIPLES = [(f"e{i}", f"r{i % 2}", f"e{(i + 1) % 12}") for i in range(12)] + \
          [(f"e{i}", f"r{(i + 1) % 2}", f"e{(i + 3) % 12}") for i in range(12)]


def _graph(folder: Path, train: list | bytes, valid: list | None = None, test: list | None = None) -> None:
    folder.mkdir()
    for split, rows in (("train", train), ("valid", valid or TRIPLES[:3]), ("test", test or TRIPLES[3:6])):
        data = rows if isinstance(rows, bytes) else "".join("\t".join(t) + "\n" for t in rows).encode()
        (folder / f"{split}.txt").write_bytes(data)


def _kg_files(d: Path) -> None:
    from embstab.kg import load_triples_graph, train

    _graph(d / "g", TRIPLES)
    _graph(d / "one", [("a", "r", "a")], [("a", "r", "a")], [("a", "r", "a")])
    _graph(d / "nul", TRIPLES + [("e1\x00", "r0", "e2")])
    _graph(d / "nel", TRIPLES[:5] + [("e1\x85e2", "r0", "e2")] + TRIPLES[5:])
    _graph(d / "fs", TRIPLES + [("e1", "r0\x1c", "e2")])
    _graph(d / "vt", TRIPLES + [("e1", "r0", "e\x0b2")])
    _graph(d / "del", TRIPLES + [("e1", "r0", "e2\x7f")])
    _graph(d / "validnul", TRIPLES, TRIPLES[:2] + [("e1", "r0", "e2\x00")])
    _graph(d / "cr", TRIPLES[:2] + [("e1\re3", "r0", "e2")] + TRIPLES[2:])
    _graph(d / "badutf", "".join("\t".join(t) + "\n" for t in TRIPLES[:7]).encode() + b"caf\xe9\tr0\te1\n")
    # a U+2028 inside a label on line 2, a malformed line 5: the error must say line 5
    rows = ["\t".join(t) for t in TRIPLES[:4]]
    rows[1] = "e1\u2028x\tr0\te2"
    _graph(d / "ls", ("\n".join(rows) + "\ne1 r0 e2\n").encode(), TRIPLES[:3], TRIPLES[3:6])
    # two labels that differ by a trailing NUL only: saved tables would merge them
    _graph(d / "twins", TRIPLES + [("e1\x00", "r0", "e1")])
    graph = load_triples_graph(*(d / "g" / f"{s}.txt" for s in ("train", "valid", "test")), name="g")
    for model in ("TransE", "DistMult"):
        train(graph, model, dim=4, epochs=1, progress=False, evaluate_on=None).save(d / f"m_{model.lower()}")
    _model_variant(d, "cfg_dim_huge", dim=10**9)
    _model_variant(d, "cfg_dim_word", dim="four")
    _model_variant(d, "cfg_dim_1e30", dim=10**30)
    _model_variant(d, "cfg_dim_negative", dim=-3)
    _model_variant(d, "cfg_dim_fraction", dim=2.5)
    _model_variant(d, "cfg_dim_bool", dim=True)
    _model_variant(d, "cfg_dim_inf", raw='"dim": Infinity')
    _model_variant(d, "cfg_model_number", model=5)
    _model_variant(d, "cfg_kwargs_text", model_kwargs="x")
    _model_variant(d, "cfg_metrics_bogus", metrics={"bogus": 1})
    _model_variant(d, "cfg_losses_text", losses="low")
    _model_variant(d, "cfg_deep", raw='"deep": ' + "[" * 3000 + "]" * 3000)
    _model_variant(d, "cfg_dim_mismatch", dim=8)
    _model_variant(d, "mix_distmult_cfg", source="m_transe", config_from="m_distmult")
    _model_variant(d, "mix_transe_cfg", source="m_distmult", config_from="m_transe")
    bad = _model_variant(d, "weights_garbage")
    (bad / "model.safetensors").write_bytes(b"this is not a safetensors file" * 10)
    tensor = _model_variant(d, "weights_tensor")
    import torch
    from safetensors.torch import save_file

    save_file({"x": torch.zeros(3)}, str(tensor / "model.safetensors"))
    latin = _model_variant(d, "cfg_latin1")
    (latin / "config.json").write_bytes((latin / "config.json").read_bytes()[:-1] + b', "note": "caf\xe9"}')


def _model_variant(d: Path, name: str, source: str = "m_transe", config_from: str | None = None,
                   raw: str | None = None, **changes) -> Path:
    folder = d / name
    shutil.copytree(d / source, folder)
    config = json.loads((d / (config_from or source) / "config.json").read_text())
    config.update(changes)
    text = json.dumps(config)
    if raw is not None:
        text = text[:-1] + ", " + raw + "}"
    (folder / "config.json").write_text(text)
    return folder


# ----------------------------------------------------------------------------- embedding files
def _embedding_files(d: Path) -> None:
    import zipfile
    import zlib

    from embstab.io.compressed import MAGIC

    rng = np.random.default_rng(0)
    with open(d / "big.txt", "w") as fh:  # one 20,000-d vector, then 2,000,000 blank lines
        fh.write("w " + " ".join(["0.5"] * 20_000) + "\n")
        fh.write("\n" * 2_000_000)
    small = embstab.Embedding(["w", *[f"x{i}" for i in range(30)]], rng.normal(size=(31, 20)), name="small")
    small.save(d / "small.txt")
    deep = "[" * 3000 + "]" * 3000
    emb = embstab.Embedding(["a", "b", "c"], np.eye(3), name="c")
    embstab.save(emb, d / "ok.esq")
    blob = (d / "ok.esq").read_bytes()
    pos = len(MAGIC)
    hlen = int.from_bytes(blob[pos:pos + 4], "little")
    head = (json.dumps(json.loads(blob[pos + 4:pos + 4 + hlen]))[:-1] + ', "deep": ' + deep + "}").encode()
    body = blob[pos + 4 + hlen + 4:]
    (d / "deep.esq").write_bytes(MAGIC + len(head).to_bytes(4, "little") + head
                                 + zlib.crc32(head).to_bytes(4, "little") + body)
    embstab.save(emb, d / "ok.npz")
    import io

    with zipfile.ZipFile(d / "ok.npz") as zf, zipfile.ZipFile(d / "deep.npz", "w") as out:
        for member in zf.namelist():
            if member != "meta.npy":
                out.writestr(member, zf.read(member))
        buf = io.BytesIO()
        np.lib.format.write_array(buf, np.array(deep))
        out.writestr("meta.npy", buf.getvalue())
    # hyperbolic: a tree, its embedding, and the embedding with a deep header
    (d / "tree.txt").write_text("0 1\n1 2\n1 3\n3 4\n")
    (d / "forest.txt").write_text("0 1\n1 2\n5 6\n")
    from embstab.hyperbolic import embed, load_edgelist, save_embedding

    save_embedding(embed(load_edgelist(d / "tree.txt"), "combinatorial", dim=2), d / "ok.hyp")
    lines = (d / "ok.hyp").read_text().split("\n")
    lines[1] = lines[1][:-1] + ', "deep": ' + deep + "}"
    (d / "deep.hyp").write_text("\n".join(lines))


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    """One workspace of good and hostile files for every case (inputs are checked unchanged after each)."""
    d = tmp_path_factory.mktemp("bounds")
    _study_files(d)
    _kg_files(d)
    _embedding_files(d)
    (d / "empty_cache").mkdir()
    return d


# ----------------------------------------------------------------------------- the cases
S = ["--store", "{d}/store", "--no-report", "--scheduler", "synchronous", "--no-progress"]
KGD = lambda b: ["kg", "downstream", "{d}/m_transe", f"{{d}}/{b}", "--graph", "{d}/g"]  # noqa: E731
HYP = ["hyperbolic", "embed", "{d}/tree.txt", "-o", "{d}/out.hyp", "--quiet"]

# (id, argv with {d} for the workspace, words the one stderr line must contain)
CASES = [
    # alias nests (billion laughs) and other documents that expand without bound
    ("laughs-in-options", ["study", "{d}/laughs_options.yaml", *S],
     ["laughs_options.yaml", "aliases (the first at line 10)", "2,000,000"]),
    ("laughs-in-params", ["study", "{d}/laughs_params.yaml", *S], ["laughs_params.yaml", "aliases"]),
    ("laughs-top-level", ["study", "{d}/laughs_top.yaml", *S], ["laughs_top.yaml", "line 2", "aliases"]),
    ("laughs-merge-keys", ["study", "{d}/laughs_merge.yaml", *S], ["laughs_merge.yaml", "aliases"]),
    ("alias-long-scalar", ["study", "{d}/long_scalar.yaml", *S], ["long_scalar.yaml", "too large"]),
    ("alias-recursive-list", ["study", "{d}/recursive_list.yaml", *S], ["recursive_list.yaml", "line 1", "a recursive structure"]),
    ("alias-recursive-map", ["study", "{d}/recursive_map.yaml", *S], ["recursive_map.yaml", "a recursive structure"]),
    # nesting that ended in RecursionError
    ("deep-flow-list", ["study", "{d}/deep_flow_list.yaml", *S], ["deep_flow_list.yaml", "line 1", "100 levels"]),
    ("deep-flow-map", ["study", "{d}/deep_flow_map.yaml", *S], ["deep_flow_map.yaml", "100 levels"]),
    ("deep-block", ["study", "{d}/deep_block.yaml", *S], ["deep_block.yaml", "line 101", "100 levels"]),
    ("deep-in-options", ["study", "{d}/deep_mixed.yaml", *S], ["deep_mixed.yaml", "100 levels"]),
    ("deep-kg-config", KGD("cfg_deep"), ["cfg_deep/config.json", "100 levels"]),
    ("deep-esq-header", ["compare", "{d}/deep.esq", "{d}/ok.esq"], ["deep.esq", "100 levels"]),
    ("deep-npz-meta", ["compare", "{d}/deep.npz", "{d}/ok.esq"], ["deep.npz", "meta"]),
    ("deep-hyperbolic-header", ["hyperbolic", "eval", "{d}/tree.txt", "{d}/deep.hyp"],
     ["deep.hyp", "line 2", "100 levels"]),
    # a key given twice: the later one silently won
    ("dup-training", ["study", "{d}/dup_training.yaml", *S], ["dup_training.yaml", "line 8", "'training'", "line 3"]),
    ("dup-nested", ["study", "{d}/dup_nested.yaml", *S], ["dup_nested.yaml", "line 3", "'dimensions'"]),
    ("dup-flow", ["study", "{d}/dup_flow.yaml", *S], ["dup_flow.yaml", "line 7", "'task'"]),
    ("dup-options", ["study", "{d}/dup_options.yaml", *S], ["dup_options.yaml", "'limit'"]),
    ("dup-quoted", ["study", "{d}/dup_quoted.yaml", *S], ["dup_quoted.yaml", "line 8", "'name'", "line 1"]),
    ("dup-corpus-name", ["study", "{d}/dup_corpus.yaml", *S], ["dup_corpus.yaml", "line 2", "'name'"]),
    ("dup-block", ["study", "{d}/dup_block.yaml", *S], ["dup_block.yaml", "'name'", "first given at line 1"]),
    # not UTF-8: file and byte offset
    ("study-latin1", ["study", "{d}/latin1.yaml", *S],
     ["latin1.yaml", "line 8", "UTF-8", f"byte offset {len((WORD + DOWN).encode()) + len('description: caf')}"]),
    ("study-ff-byte", ["study", "{d}/ff_byte.yaml", *S], ["ff_byte.yaml", "line 1", "byte offset 0"]),
    ("study-bad-comment", ["study", "{d}/bad_comment.yaml", *S], ["bad_comment.yaml", "UTF-8", "byte offset"]),
    ("study-truncated-utf8", ["study", "{d}/truncated_utf8.yaml", *S], ["truncated_utf8.yaml", "UTF-8"]),
    ("triples-latin1", ["kg", "train", "--graph", "{d}/badutf", "-o", "{d}/out_kg"],
     ["badutf/train.txt", "line 8", "UTF-8", "byte offset"]),
    ("kg-config-latin1", KGD("cfg_latin1"), ["cfg_latin1/config.json", "UTF-8"]),
    # grids that plan more rows than any machine runs
    ("rows-kg-sweep", ["study", "{d}/kg_sweep.yaml", *S],
     ["kg_sweep.yaml", "68,000,000 rows", "training.algorithms (4)", "training.seeds (1,000)",
      "training.dimensions (1,000)", "compression.bit_widths (17)", "20,000"]),
    ("rows-ocs-transforms", ["study", "{d}/ocs_sweep.yaml", *S],
     ["ocs_sweep.yaml", "24,000 rows", "compression.transforms (6,000)", "compression.bit_widths (4)"]),
    ("rows-seeds", ["study", "{d}/seed_sweep.yaml", *S],
     ["seed_sweep.yaml", "22,011 rows", "training.seeds (2,001) x compression.bit_widths (11)"]),
    ("rows-grid", ["study", "{d}/grid_sweep.yaml", *S], ["grid_sweep.yaml", "20,200 rows"]),
    # transform parameters
    ("transform-tt-inf", ["study", "{d}/tt_inf.yaml", *S], ["tt_inf.yaml", "compression.transforms[0]", "tt:inf"]),
    ("transform-tt-nan", ["study", "{d}/tt_nan.yaml", *S], ["tt_nan.yaml", "compression.transforms[0]", "tt:nan"]),
    ("transform-tt-neg-inf", ["study", "{d}/tt_neg_inf.yaml", *S], ["compression.transforms[0]", "tt:-inf"]),
    ("transform-tt-1e400", ["study", "{d}/tt_1e400.yaml", *S], ["compression.transforms[0]", "tt:1e400"]),
    ("transform-ocs-inf", ["study", "{d}/ocs_inf.yaml", *S], ["compression.transforms[0]", "inf"]),
    ("transform-ocs-nan", ["study", "{d}/ocs_nan.yaml", *S], ["compression.transforms[0]", "nan"]),
    ("study-dim-word", ["study", "{d}/dim_word.yaml", *S], ["training.dimensions[0]", "'four'"]),
    # worker counts past the machine
    ("study-workers-cores", ["study", "--quick", "--workers", str(CORES + 1), "--store", "{d}/store"],
     ["--workers", f"{CORES + 1} workers", "use at most"]),
    ("study-workers-huge", ["study", "--quick", "--workers", "100000", "--store", "{d}/store"],
     ["--workers", "100000", "core"]),
    ("study-threads-huge", ["study", "--quick", "--scheduler", "threads", "--workers", "100000", "--store",
                            "{d}/store"], ["--workers", "100000"]),
    ("train-workers-huge", ["train", "--corpus", "{d}/tree.txt", "-o", "{d}/out.txt", "--workers", "100000"],
     ["--workers", "100000", "core"]),
    # knowledge graphs: labels and lines
    ("triples-nul", ["kg", "train", "--graph", "{d}/nul", "-o", "{d}/out_kg"],
     ["nul/train.txt", "line 25", "control character '\\x00'"]),
    ("triples-nel", ["kg", "train", "--graph", "{d}/nel", "-o", "{d}/out_kg"],
     ["nel/train.txt", "line 6", "control character '\\x85'"]),
    ("triples-file-separator", ["kg", "train", "--graph", "{d}/fs", "-o", "{d}/out_kg"],
     ["fs/train.txt", "line 25", "'\\x1c'"]),
    ("triples-vertical-tab", ["kg", "train", "--graph", "{d}/vt", "-o", "{d}/out_kg"], ["vt/train.txt", "line 25"]),
    ("triples-del", ["kg", "train", "--graph", "{d}/del", "-o", "{d}/out_kg"], ["del/train.txt", "line 25", "'\\x7f'"]),
    ("triples-nul-in-valid", ["kg", "train", "--graph", "{d}/validnul", "-o", "{d}/out_kg"],
     ["validnul/valid.txt", "line 3", "control"]),
    ("triples-inner-cr", ["kg", "train", "--graph", "{d}/cr", "-o", "{d}/out_kg"], ["cr/train.txt", "line 3", "'\\r'"]),
    ("triples-nul-twins", ["kg", "train", "--graph", "{d}/twins", "-o", "{d}/out_kg"],
     ["twins/train.txt", "line 25", "control"]),
    ("triples-line-after-u2028", ["kg", "train", "--graph", "{d}/ls", "-o", "{d}/out_kg"],
     ["ls/train.txt", "line 5", "3 tab-separated"]),
    ("kg-one-entity", ["kg", "train", "--graph", "{d}/one", "-o", "{d}/out_kg", "--epochs", "1"],
     ["graph 'one'", "1 entity", "at least 2 entities"]),
    ("kg-downstream-one-entity", ["kg", "downstream", "{d}/m_transe", "{d}/m_distmult", "--graph", "{d}/one"],
     ["are not those of graph 'one'"]),
    # knowledge graphs: sizes checked against the machine before allocating
    ("kg-dim-1e9", ["kg", "train", "--graph", "{d}/g", "-o", "{d}/out_kg", "--dim", "1000000000"],
     ["dim=1000000000", "needs about", "available"]),
    ("kg-negatives-1e9", ["kg", "train", "--graph", "{d}/g", "-o", "{d}/out_kg", "--negatives", "1000000000"],
     ["negatives=1000000000", "needs about", "lower dim, negatives or batch_size"]),
    ("kg-dim-1e6-negatives-1e3", ["kg", "train", "--graph", "{d}/g", "-o", "{d}/out_kg", "--dim", "1000000",
                                  "--negatives", "1000"], ["dim=1000000", "negatives=1000", "needs about"]),
    ("kg-config-dim-1e9", KGD("cfg_dim_huge"), ["cfg_dim_huge", "dim=1000000000", "needs about"]),
    ("kg-config-dim-1e30", KGD("cfg_dim_1e30"), ["cfg_dim_1e30", f"dim={10**30}", "needs about"]),
    # knowledge graphs: model folders whose files disagree or are malformed
    ("kg-config-dim-word", KGD("cfg_dim_word"), ["cfg_dim_word/config.json", "key 'dim'", "'four'"]),
    ("kg-config-dim-negative", KGD("cfg_dim_negative"), ["cfg_dim_negative/config.json", "key 'dim'", "-3"]),
    ("kg-config-dim-fraction", KGD("cfg_dim_fraction"), ["key 'dim'", "2.5"]),
    ("kg-config-dim-bool", KGD("cfg_dim_bool"), ["key 'dim'", "True"]),
    ("kg-config-dim-inf", KGD("cfg_dim_inf"), ["key 'dim'", "inf"]),
    ("kg-config-model-number", KGD("cfg_model_number"), ["key 'model'", "5"]),
    ("kg-config-kwargs-text", KGD("cfg_kwargs_text"), ["key 'model_kwargs'"]),
    ("kg-config-metrics-bogus", KGD("cfg_metrics_bogus"), ["key 'metrics'", "mrr"]),
    ("kg-config-losses-text", KGD("cfg_losses_text"), ["key 'losses'", "'low'"]),
    ("kg-weights-distmult-cfg", KGD("mix_distmult_cfg"),
     ["mix_distmult_cfg/model.safetensors", "DistMult", "config.json", "missing"]),
    ("kg-weights-transe-cfg", KGD("mix_transe_cfg"), ["mix_transe_cfg/model.safetensors", "TransE", "unexpected"]),
    ("kg-weights-dim-mismatch", KGD("cfg_dim_mismatch"), ["cfg_dim_mismatch/model.safetensors", "dim 8", "[12, 4]"]),
    ("kg-weights-garbage", KGD("weights_garbage"), ["weights_garbage/model.safetensors", "header length exceeds"]),
    ("kg-weights-tensor", KGD("weights_tensor"), ["weights_tensor/model.safetensors", "unexpected x"]),
    # hyperbolic working precision
    ("precision-bits-1e8", [*HYP, "--precision-bits", "100000000"], ["precision=100000000", "1048576"]),
    ("precision-bits-2e20-plus-1", [*HYP, "--precision-bits", str(2**20 + 1)], [f"precision={2**20 + 1}"]),
    ("precision-bits-forest", ["hyperbolic", "embed", "{d}/forest.txt", "-o", "{d}/out.hyp", "--quiet", "--forest",
                               "--precision-bits", "100000000"], ["precision=100000000"]),
    ("precision-from-bits", [*HYP, "--bits", "100000000"], ["bits=100000000", "1048576"]),
    ("precision-from-eps", [*HYP, "--eps", "1e-300"], ["eps", "1048576"]),
    ("precision-from-tau", [*HYP, "--tau", "1e30"], ["tau=1e+30", "smaller tau"]),
    # text embeddings: a huge, mostly blank file against a small one
    ("compare-20000d-blank-lines", ["compare", "{d}/big.txt", "{d}/small.txt"], ["'big' (20000-d)", "'small' (20-d)",
                                                                                  "knn"]),
    ("compare-20000d-self", ["compare", "{d}/big.txt", "{d}/big.txt", "--measures", "pip_loss"],
     ["20000-d", "pip_loss"]),
]


def _snapshot(d: Path) -> dict[str, tuple]:
    """Type and content hash of every entry of the workspace."""
    out = {}
    for p in sorted(d.rglob("*")):
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode):
            out[str(p)] = ("file", st.st_ino, hashlib.sha256(p.read_bytes()).hexdigest())
        else:
            out[str(p)] = ("other", stat.S_IFMT(st.st_mode))
    return out


def _peak_rss() -> int:
    """This process's peak resident memory so far, in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _run_case(ws: Path, capsys, argv: list[str], words: list[str]) -> None:
    before = _snapshot(ws)
    peak = _peak_rss()
    start = time.perf_counter()
    code = cli.main([a.replace("{d}", str(ws)) for a in argv])
    elapsed = time.perf_counter() - start
    grown = _peak_rss() - peak
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert code == 2, captured.err[-2000:]
    assert len(lines) == 1, captured.err[-2000:]
    assert lines[0].startswith("embstab") and "Traceback" not in captured.err, lines[0]
    for word in words:
        assert word.replace("{d}", str(ws)) in lines[0], lines[0]
    assert len(lines[0]) < 2000, "the line should say what is wrong, not dump the input"
    assert _snapshot(ws) == before, "an input changed, or an output was written"
    assert elapsed < 30, f"took {elapsed:.1f} s: it should be refused before any real work"
    assert grown < 600 * 2**20, f"the peak memory grew by {grown / 2**20:.0f} MiB: it should be refused before"


@pytest.mark.parametrize("case, argv, words", CASES, ids=[c[0] for c in CASES])
def test_hostile_input_exits_2_with_one_line(ws, capsys, case, argv, words):
    _run_case(ws, capsys, argv, words)


def test_missing_standard_graph_names_the_kg_fetch_command(ws, capsys, monkeypatch):
    monkeypatch.setenv("EMBSTAB_DATA", str(ws / "empty_cache"))
    _run_case(ws, capsys, ["kg", "train", "--graph", "wn18rr", "-o", "{d}/out_kg"],
              ["wn18rr", "embstab data fetch wn18rr"])


# ----------------------------------------------------------------------------- contextual tokenizers
@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    """A saved two-layer BERT whose tokenizer.json the cases below replace."""
    pytest.importorskip("transformers")
    from embstab.contextual import train_wordpiece
    from embstab.contextual.model import ModelSize, build_model

    d = tmp_path_factory.mktemp("bert")
    tok = train_wordpiece([["the", "cat", "sat", "on", "a", "mat"]] * 20, vocab_size=40, min_frequency=1)
    build_model(ModelSize(1, 8, 1, 16), tok, max_length=16).save(d / "model")
    (d / "text.txt").write_text("the cat sat\n")
    return d


TOKENIZER_CASES = [
    ("truncated", '{"version": "1.0", "model": {"type": "WordPiece", "vocab": {"[UNK]": 0'),
    ("not-json", "this is not json"),
    ("wrong-schema", '{"version": "1.0", "model": 5}'),
    ("empty", ""),
]


@pytest.mark.parametrize("case, text", TOKENIZER_CASES, ids=[c[0] for c in TOKENIZER_CASES])
def test_malformed_tokenizer_json_is_one_line(bert_dir, capsys, case, text):
    folder = bert_dir / case
    if not folder.exists():
        shutil.copytree(bert_dir / "model", folder)
        (folder / "tokenizer.json").write_text(text)
    _run_case(bert_dir, capsys, ["contextual", "features", str(folder), "--text", "{d}/text.txt",
                                 "--out", "{d}/features.txt"], [f"{case}/tokenizer.json", "tokenizer"])


# ----------------------------------------------------------------------------- bounded by a memory limit
def _limited(argv: list[str], limit_gib: float, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``embstab ARGV`` in a fresh process whose address space is capped at ``limit_gib``."""
    cap = int(limit_gib * 2**30)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    return subprocess.run([sys.executable, "-m", "embstab", *argv], capture_output=True, text=True, env=ENV,
                          preexec_fn=limit, timeout=timeout)


LIMITED_CASES = [
    # 2.7 GB by the estimate: refused under a 3 GiB cap by the check, not by torch's allocator
    ("kg-dim-1e6", ["kg", "train", "--graph", "{d}/g", "-o", "{d}/out_kg", "--dim", "1000000", "--no-progress"],
     ["dim=1000000", "needs about", "available"]),
]


@pytest.mark.parametrize("case, argv, words", LIMITED_CASES, ids=[c[0] for c in LIMITED_CASES])
def test_refused_within_a_memory_cap(ws, case, argv, words):
    before = _snapshot(ws)
    proc = _limited([a.replace("{d}", str(ws)) for a in argv], limit_gib=3)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    for word in words:
        assert word.replace("{d}", str(ws)) in lines[0], lines[0]
    assert _snapshot(ws) == before


# ----------------------------------------------------------------------------- not errors, but hostile setups
@pytest.mark.parametrize("message", ["[enforce fail at alloc_cpu.cpp:119] . DefaultCPUAllocator: can't allocate "
                                     "memory: you tried to allocate 8000000000000 bytes. Error code 12",
                                     "CUDA out of memory. Tried to allocate 20.00 GiB"])
def test_torch_allocation_failure_is_the_out_of_memory_line(ws, capsys, monkeypatch, message):
    import embstab.kg

    def exhausted(*args, **kwargs):
        raise RuntimeError(message)

    monkeypatch.setattr(embstab.kg, "train", exhausted)
    assert cli.main(["kg", "train", "--graph", str(ws / "g"), "-o", str(ws / "out_kg")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "out of memory" in err[0], err


def test_other_runtime_errors_still_surface(ws, monkeypatch):
    import embstab.kg

    def broken(*args, **kwargs):
        raise RuntimeError("a bug, not a full memory")

    monkeypatch.setattr(embstab.kg, "train", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["kg", "train", "--graph", str(ws / "g"), "-o", str(ws / "out_kg")])


def test_line_separators_stay_inside_their_label(ws):
    """U+2028 inside a label is part of the label: 4 lines, 4 triples (str.splitlines made it 5)."""
    from embstab.kg.triples import parse_triples

    text = "a\u2028b\tr\tc\nc\tr\td\r\nd\tr\ta\ne\tr\ta\n"
    triples = parse_triples(text, "mem.txt")
    assert len(triples) == 4 and triples[0] == ("a\u2028b", "r", "c") and triples[1] == ("c", "r", "d")


def test_text_lines_split_at_newlines_only(tmp_path):
    from embstab.cli.contextual import _read_lines

    path = tmp_path / "texts.txt"
    path.write_text("one\u2028still one\ntwo\x0cstill two\r\nthree\n", encoding="utf-8", newline="")
    assert _read_lines(str(path)) == ["one\u2028still one", "two\x0cstill two", "three"]


def test_nul_labels_are_refused_by_the_graph_itself():
    from embstab.errors import VocabularyError
    from embstab.kg import KnowledgeGraph

    t = [("a", "r", "b"), ("b", "r", "a\x00")]
    with pytest.raises(VocabularyError, match="control character"):
        KnowledgeGraph.from_labeled("twins", t, t[:1], t[:1])


def test_merge_keys_may_override_and_are_not_duplicates(tmp_path):
    """A key that overrides one brought in by ``<<`` is no duplicate: the second entry is relabelled."""
    from embstab.study import load_study

    path = tmp_path / "merge.yaml"
    path.write_text(WORD + "downstream:\n  - &first {task: rt_sentiment, model: linear, label: a}\n"
                           "  - {<<: *first, label: b}\n")
    assert [d.label for d in load_study(path).downstream] == ["a", "b"]


def test_a_spec_built_in_python_is_bounded_when_planned(tmp_path):
    from dataclasses import replace

    from embstab.study import ArtifactStore, StudyDefinitionError, load_study
    from embstab.study.plan import plan_study
    from embstab.study.steps import default_steps

    spec = load_study(REPO / "pipelines" / "quick.yaml")
    big = replace(spec, training=replace(spec.training, seeds=tuple(range(5000))))
    with pytest.raises(StudyDefinitionError, match="training.seeds"):
        plan_study(big, ArtifactStore(tmp_path / "store"), default_steps())


@pytest.mark.filterwarnings("ignore:only 8 compared words")
def test_the_product_bound_leaves_row_measures_alone():
    """Few words in many dimensions: k-NN (no d x d products) answers, the span measures are refused."""
    from embstab.errors import ShapeError
    from embstab.measures.compare import compare

    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(8)]
    wide = embstab.Embedding(words, rng.normal(size=(8, 3000)), name="wide")
    narrow = embstab.Embedding(words, rng.normal(size=(8, 20)), name="narrow")
    assert compare(wide, narrow, measures=["knn"], top_n=None).loc[0, "measure"] == "knn"
    with pytest.raises(ShapeError, match="3000-d.*pip_loss.*8 compared words"):
        compare(wide, narrow, measures=["pip_loss"], top_n=None)


def test_the_suite_covers_every_category():
    assert len(CASES) + len(TOKENIZER_CASES) + len(LIMITED_CASES) >= 80, len(CASES)
    assert len({c[0] for c in CASES}) == len(CASES)
