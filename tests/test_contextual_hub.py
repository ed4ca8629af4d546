"""Hub downloads against a local server that speaks the hub's protocol; loading never downloads.

The server answers the three calls ``huggingface_hub`` makes for a snapshot: the model info
(``/api/models/ORG/NAME/revision/REV``), the file tree (``/api/models/ORG/NAME/tree/SHA``) and
``HEAD``/``GET`` on ``/ORG/NAME/resolve/SHA/FILE`` with the ``X-Repo-Commit`` and ``ETag`` headers.
It logs every request, so a test can tell what was fetched and that nothing was. Nothing here
reaches the internet: the endpoint is the local server and the hub library's default endpoint is
pointed at it too.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch

from _contextual import tiny_tokenizer  # sets HF_HUB_OFFLINE=1 for the whole process
from embstab.cli import main
from embstab.contextual import (HubNameError, ModelNotDownloadedError, UnsafeWeightsError, download_model,
                                load_model, sentence_features)
from embstab.contextual.hub import HubModel, hub_dir
from embstab.data import DataNotFoundError, DownloadError

hf = pytest.importorskip("huggingface_hub")
transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

REPO = "tiny-org/bert-tiny"
WANTED = {"config.json", "model.safetensors", "tokenizer.json", "vocab.txt", "tokenizer_config.json", "embstab.json"}


# --------------------------------------------------------------------------- the served models
def _tiny_bert_files(tmp: Path) -> dict[str, bytes]:
    """config.json and model.safetensors of a 2-layer, 32-hidden BERT saved by transformers."""
    tok = tiny_tokenizer()
    config = transformers.BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        net = transformers.BertForMaskedLM(config)
    net.save_pretrained(tmp)
    return {name: (tmp / name).read_bytes() for name in ("config.json", "model.safetensors")}


def _vocab_txt() -> bytes:
    vocab = tiny_tokenizer().get_vocab()
    return "".join(f"{piece}\n" for piece, _ in sorted(vocab.items(), key=lambda kv: kv[1])).encode()


class Hub:
    """Repositories (name -> files) served at one commit each, and a log of (method, path) requests.

    As on the real hub, a weights file (an LFS file) is not served by ``/resolve``: that answers a
    redirect to a storage host (``cdn``, another origin) with the file's ``X-Linked-Etag`` and
    ``X-Linked-Size``; small files are served directly with ``ETag`` and ``Content-Length``.
    """

    def __init__(self) -> None:
        self.repos: dict[str, dict[str, bytes]] = {}
        self.log: list[tuple[str, str]] = []
        self.cdn = ""

    def sha(self, repo: str) -> str:
        digest = hashlib.sha1(repo.encode())
        for name, data in sorted(self.repos[repo].items()):
            digest.update(name.encode() + hashlib.sha1(data).digest())
        return digest.hexdigest()

    def fetched(self, repo: str) -> set[str]:
        """Files of ``repo`` whose bytes were sent: by ``/resolve`` or, for LFS files, by the CDN."""
        prefix = f"/{repo}/resolve/{self.sha(repo)}/"
        blobs = {f"/cdn/{hashlib.sha256(data).hexdigest()}": name for name, data in self.repos[repo].items()}
        gets = [path for method, path in self.log if method == "GET"]
        return {p[len(prefix):] for p in gets if p.startswith(prefix)} | {blobs[p] for p in gets if p in blobs}


def _handler(hub: Hub):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep the test output clean
            pass

        def _send(self, status: int, body: bytes = b"", headers: dict | None = None) -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, value) -> None:
            self._send(200, json.dumps(value).encode(), {"Content-Type": "application/json"})

        def _route(self) -> None:
            path = self.path.split("?")[0]
            hub.log.append((self.command, path))
            parts = path.strip("/").split("/")
            if parts[0] == "cdn" and len(parts) == 2:  # the storage host: blobs by SHA-256
                blobs = {hashlib.sha256(d).hexdigest(): d for files in hub.repos.values() for d in files.values()}
                return self._send(200, blobs[parts[1]]) if parts[1] in blobs else self._send(404)
            if parts[:2] == ["api", "models"] and len(parts) >= 6:
                repo, action, rev = "/".join(parts[2:4]), parts[4], parts[5]
            elif len(parts) >= 5 and parts[2] == "resolve":
                repo, action, rev = "/".join(parts[:2]), "resolve", parts[3]
            else:
                return self._send(404)
            if repo not in hub.repos:
                return self._send(404, b"Repository not found", {"X-Error-Code": "RepoNotFound",
                                                                  "X-Error-Message": "Repository not found"})
            files, sha = hub.repos[repo], hub.sha(repo)
            if rev not in ("main", sha):
                return self._send(404, b"Invalid rev id", {"X-Error-Code": "RevisionNotFound"})
            if action == "revision":
                return self._json({"id": repo, "sha": sha, "private": False,
                                   "siblings": [{"rfilename": name} for name in sorted(files)]})
            if action == "tree":
                return self._json([{"type": "file", "path": name, "size": len(data),
                                    "oid": hashlib.sha1(data).hexdigest()} for name, data in sorted(files.items())])
            name = "/".join(parts[4:])
            if name not in files:
                return self._send(404, b"Entry not found", {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": sha})
            data = files[name]
            if name.endswith(".safetensors"):
                digest = hashlib.sha256(data).hexdigest()
                return self._send(302, b"", {"Location": f"{hub.cdn}/cdn/{digest}", "X-Repo-Commit": sha,
                                             "X-Linked-Etag": f'"{digest}"', "X-Linked-Size": str(len(data)),
                                             "ETag": f'"{hashlib.sha1(data).hexdigest()}"'})
            self._send(200, data, {"X-Repo-Commit": sha, "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                                   "Content-Type": "application/octet-stream"})

        do_GET = do_HEAD = _route

    return Handler


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A running local hub (and its storage host) with six repositories; yields (hub, url, served weights)."""
    tmp = tmp_path_factory.mktemp("served")
    bert = _tiny_bert_files(tmp)
    tok_json = tiny_tokenizer().to_str().encode()
    hub = Hub()
    hub.repos[REPO] = {**bert, "tokenizer.json": tok_json, "vocab.txt": _vocab_txt(),
                       "tokenizer_config.json": b'{"do_lower_case": true}', "README.md": b"# tiny\n",
                       "pytorch_model.bin": b"pickle that must never be fetched",
                       "1_Pooling/config.json": b"{}", "onnx/model.onnx": b"onnx"}
    hub.repos["tiny-org/vocab-only"] = {**bert, "vocab.txt": _vocab_txt(),
                                        "tokenizer_config.json": b'{"do_lower_case": true}'}
    hub.repos["tiny-org/pickle-only"] = {"config.json": bert["config.json"], "vocab.txt": _vocab_txt(),
                                         "pytorch_model.bin": b"pickle that must never be fetched"}
    hub.repos["tiny-org/gpt"] = {"config.json": b'{"model_type": "gpt2", "n_layer": 2}',
                                 "model.safetensors": bert["model.safetensors"], "tokenizer.json": tok_json}
    hub.repos["tiny-org/tf-only"] = {"config.json": bert["config.json"], "tf_model.h5": b"h5", "vocab.txt": _vocab_txt()}
    hub.repos["tiny-org/no-config"] = {"model.safetensors": bert["model.safetensors"], "tokenizer.json": tok_json}
    server, cdn = (ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub)) for _ in range(2))
    for s in (server, cdn):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    hub.cdn = f"http://127.0.0.1:{cdn.server_address[1]}"
    weights = safetensors_torch.load_file(str(tmp / "model.safetensors"))
    yield hub, url, weights
    for s in (server, cdn):
        s.shutdown()
        s.server_close()


@pytest.fixture(autouse=True)
def local_only(monkeypatch):
    """Any name lookup other than the loopback address fails: no test can reach the internet."""
    real = socket.getaddrinfo

    def guarded(host, *args, **kwargs):
        if host not in ("127.0.0.1", b"127.0.0.1"):
            raise OSError(f"test tried to reach {host!r}")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", guarded)


@pytest.fixture
def online(served, tmp_path, monkeypatch):
    """Downloads switched on, pointed at the local hub; every cache inside ``tmp_path``."""
    hub, url, _ = served
    monkeypatch.setenv("EMBSTAB_DATA", str(tmp_path / "embstab"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(hf.constants, "HF_HUB_OFFLINE", False)
    # even a call without an endpoint stays local (file URLs are built from the template)
    monkeypatch.setattr(hf.constants, "ENDPOINT", url)
    monkeypatch.setattr(hf.constants, "HUGGINGFACE_CO_URL_TEMPLATE", url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(hf.constants, "HF_TOKEN_PATH", str(tmp_path / "hf" / "token"))
    hub.log.clear()
    return hub, url


# --------------------------------------------------------------------------- tests
def test_download_then_load_gives_the_served_weights_and_fetches_only_what_bert_needs(served, online):
    hub, url = online
    _, _, weights = served
    folder = download_model(REPO, endpoint=url, progress=False)
    assert folder == hub_dir(HubModel(REPO)) and folder.is_relative_to(Path(os.environ["EMBSTAB_DATA"]))
    assert {p.name for p in folder.iterdir() if p.is_file()} == WANTED
    # no pickle, no README, nothing from sub-folders went over the wire
    assert hub.fetched(REPO) == WANTED - {"embstab.json"}
    # the weights came from the storage host the hub redirected to, as LFS files do on the real hub
    assert ("GET", f"/{REPO}/resolve/{hub.sha(REPO)}/model.safetensors") not in hub.log
    assert sum(method == "GET" and path.startswith("/cdn/") for method, path in hub.log) == 1
    record = json.loads((folder / "embstab.json").read_text())["metadata"]
    assert record["commit"] == hub.sha(REPO) and record["endpoint"] == url and record["layers"] == 2

    model = load_model(folder)
    state = model.network.state_dict()
    assert weights and all(torch.equal(state[k], v) for k, v in weights.items())
    assert model.name == REPO and model.hidden_size == 32 and model.max_length == 64
    assert model.tokenizer.get_vocab() == tiny_tokenizer().get_vocab()
    by_name = load_model(f"hub:{REPO}")
    assert all(torch.equal(by_name.network.state_dict()[k], v) for k, v in weights.items())
    text = [["the", "prime", "minister", "said"]]
    assert torch.equal(torch.as_tensor(sentence_features(model, text)), torch.as_tensor(sentence_features(by_name,
                                                                                                          text)))


def test_a_finished_download_is_reused_without_the_network(served, online, monkeypatch):
    hub, url = online
    first = download_model(REPO, endpoint=url, progress=False)
    requests = len(hub.log)
    # an endpoint nobody listens on: a second call that touched the network would fail
    again = download_model(REPO, endpoint="http://127.0.0.1:9", progress=False)
    assert again == first and len(hub.log) == requests
    monkeypatch.setattr(hf.constants, "HF_HUB_OFFLINE", True)
    assert load_model(f"hub:{REPO}").n_layers == 2
    # an interrupted download (its record not yet complete) is resumed: only what is missing is fetched
    record = json.loads((first / "embstab.json").read_text())
    record["metadata"]["complete"] = False
    (first / "embstab.json").write_text(json.dumps(record))
    (first / "model.safetensors").unlink()
    monkeypatch.setattr(hf.constants, "HF_HUB_OFFLINE", False)
    with pytest.raises(ModelNotDownloadedError):
        load_model(f"hub:{REPO}")
    hub.log.clear()
    download_model(REPO, endpoint=url, progress=False)
    assert hub.fetched(REPO) == {"model.safetensors"}
    assert load_model(f"hub:{REPO}").hidden_size == 32


def test_a_repo_with_only_vocab_txt_gets_a_tokenizer_that_splits_like_the_original(online, tmp_path):
    hub, url = online
    folder = download_model("tiny-org/vocab-only", endpoint=url, dest=tmp_path / "model", progress=False)
    assert folder == tmp_path / "model" and (folder / "tokenizer.json").is_file()
    built, original = load_model(folder).tokenizer, tiny_tokenizer()
    for text in ["The Prime Minister said on Tuesday", "unbelievably xylophonic zzzq", "naïve café, 1999!"]:
        assert built.encode(text).ids == original.encode(text).ids


def test_pickle_weights_are_refused_without_fetching_them(online):
    hub, url = online
    with pytest.raises(UnsafeWeightsError, match=r"has only pickle weights \(pytorch_model.bin\), which embstab refuses"):
        download_model("tiny-org/pickle-only", endpoint=url, progress=False)
    assert hub.fetched("tiny-org/pickle-only") == set()
    assert not hub_dir(HubModel("tiny-org/pickle-only")).exists()


@pytest.mark.parametrize("repo,message", [
    ("tiny-org/missing", "no model repository 'tiny-org/missing' on http://127.0.0.1:"),
    ("tiny-org/no-config", "has no config.json: not a transformers model"),
    ("tiny-org/gpt", "'tiny-org/gpt' is a gpt2 model; embstab's contextual models are BERT encoders"),
    ("tiny-org/tf-only", "'tiny-org/tf-only' on http://127.0.0.1:"),
])
def test_unusable_repositories_give_one_line(online, repo, message):
    hub, url = online
    with pytest.raises(DownloadError) as err:
        download_model(repo, endpoint=url, progress=False)
    assert message in str(err.value) and "\n" not in str(err.value)
    if repo == "tiny-org/tf-only":
        assert "has no model.safetensors" in str(err.value) and not isinstance(err.value, UnsafeWeightsError)
    if repo == "tiny-org/gpt":  # the config is read first, so the weights are never fetched
        assert hub.fetched(repo) == {"config.json"}
    assert not hub_dir(HubModel(repo)).exists()  # a refused repository leaves nothing behind


def test_force_and_the_target_folder(online, tmp_path):
    hub, url = online
    folder = download_model(REPO, endpoint=url, dest=tmp_path / "a", progress=False)
    hub.log.clear()
    assert download_model(REPO, endpoint=url, dest=folder, force=True) == folder  # with progress bars
    assert hub.fetched(REPO) == WANTED - {"embstab.json"}
    with pytest.raises(DownloadError, match=r"holds the download of 'tiny-org/bert-tiny'; give another folder"):
        download_model("tiny-org/vocab-only", endpoint=url, dest=folder, progress=False)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(DownloadError, match=r"the folder is not empty and holds no hub download"):
        download_model(REPO, endpoint=url, dest=tmp_path / "other", progress=False)
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"
    with pytest.raises(DownloadError, match=r"it is a file"):
        download_model(REPO, endpoint=url, dest=tmp_path / "other" / "notes.txt", progress=False)


def test_unknown_revision_offline_mode_and_unreachable_hub(online, monkeypatch):
    hub, url = online
    with pytest.raises(DownloadError, match=r"'tiny-org/bert-tiny' on .* has no revision 'v9'"):
        download_model(REPO, revision="v9", endpoint=url, progress=False)
    with pytest.raises(DownloadError, match=r"cannot reach http://127.0.0.1:9 to download 'tiny-org/bert-tiny'"):
        download_model(REPO, endpoint="http://127.0.0.1:9", progress=False)
    monkeypatch.setattr(hf.constants, "HF_HUB_OFFLINE", True)
    hub.log.clear()
    with pytest.raises(DownloadError, match=r"hub downloads are switched off \(HF_HUB_OFFLINE is set\)"):
        download_model(REPO, endpoint=url, progress=False)
    assert hub.log == []


def test_a_hub_name_never_downloads(online):
    hub, url = online
    with pytest.raises(ModelNotDownloadedError) as err:
        load_model(f"hub:{REPO}")
    message = str(err.value)
    assert isinstance(err.value, DataNotFoundError)
    assert message == (f"hub model '{REPO}' is not downloaded (nothing is fetched when a model loads); "
                       f"run `embstab contextual download {REPO}` first")
    with pytest.raises(ModelNotDownloadedError, match=r"run `embstab contextual download org/m --revision v2` first"):
        load_model("hub:org/m@v2")
    assert hub.log == []


@pytest.mark.parametrize("name", ["hub:", "hub:org/a/b", "hub:org--x/m", "hub:../etc", "hub:org/m@", "hub:-x/m"])
def test_malformed_hub_names(name):
    with pytest.raises(HubNameError):
        load_model(name)


def test_cli_download_and_use(online, tmp_path, capsys):
    hub, url = online
    assert main(["contextual", "download", REPO, "--endpoint", url, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"load it as hub:{REPO}" in out and "2 layers x 32 hidden" in out
    assert main(["contextual", "features", f"hub:{REPO}", "--corpus", "gensim_lee", "--max-docs", "5",
                 "--min-count", "2", "--out", str(tmp_path / "w.txt")]) == 0
    assert (tmp_path / "w.txt").stat().st_size > 0
    assert "words x 32 (layer" in capsys.readouterr().err  # the summary on stderr: --out may be /dev/stdout
    assert main(["contextual", "download", "tiny-org/pickle-only", "--endpoint", url, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refuses (reading pickle can run code" in err
    assert main(["contextual", "features", "hub:tiny-org/never", "--corpus", "gensim_lee", "--out", "x.txt"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "run `embstab contextual download tiny-org/never` first" in err


def test_cli_download_help_has_examples(capsys):
    assert main(["contextual", "download", "--help"]) == 0
    text = capsys.readouterr().out
    assert "examples:" in text and "--revision" in text and "--endpoint" in text and "pytorch_model.bin" in text


def test_cli_download_in_a_fresh_interpreter(online, tmp_path):
    """The command on its own, without transformers or the hub library imported beforehand."""
    hub, url = online
    env = dict(os.environ, HF_HUB_OFFLINE="0", HF_ENDPOINT=url, PYTHONPATH=str(Path(__file__).parents[1]))
    proc = subprocess.run([sys.executable, "-m", "embstab", "contextual", "download", REPO, "--endpoint", url,
                           "--no-progress"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"load it as hub:{REPO}" in proc.stdout and hub.fetched(REPO) == WANTED - {"embstab.json"}


def test_a_local_folder_with_only_pickle_weights_is_refused(tmp_path):
    """Loading never unpickles: a folder whose weights are only pytorch_model.bin is refused by name."""
    from embstab.contextual import load_model
    from embstab.contextual.errors import UnsafeWeightsError

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (tmp_path / "tokenizer.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04not really")
    with pytest.raises(UnsafeWeightsError, match="pytorch_model.bin"):
        load_model(tmp_path)
