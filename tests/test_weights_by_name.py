"""model/weights/by_name.py: Hugging Face model ids from a hub cache the test lays out
(offline), the original release's zips from an HTTP server on 127.0.0.1 the test runs
(an interrupted transfer included), and a local path winning over a name."""

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import zipfile

import numpy as np
import pytest

from model.config import ModelConfig
from model.electra import ElectraPair
from model.weights import CheckpointError, by_name, huggingface, original
from runs.pretrained import open_weights
from model.weights.original import original_variables
from export import huggingface as hf_export
from tests.helpers import tiny_vocab_text, save_original
from tools import export_hf
from util import cli

CONFIG = ModelConfig.from_dict(dict(vocab_size=30, hidden_size=16, num_hidden_layers=1,
                                    num_attention_heads=1, intermediate_size=32,
                                    embedding_size=8, max_position_embeddings=16,
                                    generator_hidden_size=0.5))
REVISION = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def released(tmp_path_factory):
  """A pair in the original format (as the release's zips hold it) and its exports."""
  root = tmp_path_factory.mktemp("released")
  pair = ElectraPair(CONFIG).build_variables()
  folder = root / "electra_small"
  save_original(pair, str(folder / "electra_small"))
  (folder / "vocab.txt").write_text(tiny_vocab_text(CONFIG.vocab_size))
  for part in by_name.PARTS:
    hf_export.export(str(folder), str(root / "hf" / part), part)
  return dict(pair=pair, folder=folder, hf=root / "hf", root=root)


def same_weights(weights, pair, part):
  again = weights.load_pair(CONFIG, part)
  for (name, want, _), (_, got, _) in zip(original_variables(pair, part),
                                           original_variables(again, part)):
    np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=name)


def hub_cache(root, released, names):
  """huggingface_hub's cache layout: models--org--name/{refs/main, snapshots/<rev>/}."""
  for name, part in names.items():
    repo = root / f"models--org--{name}"
    shutil.copytree(released["hf"] / part, repo / "snapshots" / REVISION)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)


def test_hugging_face_ids_from_the_cache_offline(released, tmp_path):
  cache = tmp_path / "hub"
  hub_cache(cache, released, {"tiny-discriminator": "discriminator",
                              "tiny-generator": "generator",
                              "lone-discriminator": "discriminator"})
  script = """
import json, sys
from model.weights import CheckpointError
from runs.pretrained import open_weights
out = {}
for name in sys.argv[1:]:
  try:
    weights = open_weights(name)
    out[name] = [weights.format.__name__, weights.part_held(), weights.location,
                 weights.vocab()]
  except CheckpointError as e:
    out[name] = str(e)
print(json.dumps(out))
"""
  names = ["org/tiny-discriminator", f"org/tiny-generator@{REVISION}", "org/tiny",
           "org/lone", "org/absent-discriminator"]
  env = dict(os.environ, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1",
             ELECTRA_CACHE=str(tmp_path / "electra"))
  run = subprocess.run([sys.executable, "-c", script, *names], env=env,
                       capture_output=True, text=True, timeout=300)
  assert run.returncode == 0, run.stderr[-3000:]
  out = json.loads(run.stdout.strip().splitlines()[-1])
  snapshot = str(cache / "models--org--tiny-discriminator" / "snapshots" / REVISION)
  assert out["org/tiny-discriminator"][:3] == ["model.weights.huggingface",
                                               "discriminator", snapshot]
  assert out["org/tiny-discriminator"][3] == os.path.join(snapshot, "vocab.txt")
  assert out[f"org/tiny-generator@{REVISION}"][1] == "generator"
  # A family's name is its pair, linked side by side in the project's cache.
  family, part, location, _ = out["org/tiny"]
  assert (family, part) == ("model.weights.huggingface", "pair")
  assert location.startswith(str(tmp_path / "electra" / "hub_pairs"))
  same_weights(open_weights(location), released["pair"], "pair")
  for name in ("org/lone", "org/absent-discriminator"):  # the generator is not cached
    assert "no such path, and could not fetch org/" in out[name], out[name]
    assert "\n" not in out[name]
    assert "huggingface-cli download" in out[name]


class Release(http.server.BaseHTTPRequestHandler):
  """Serves the zip at any path; `cut` sends half of it under the full length."""
  body, cut, requests = b"", False, 0

  def do_GET(self):  # pylint: disable=invalid-name
    type(self).requests += 1
    self.send_response(200)
    self.send_header("Content-Length", str(len(self.body)))
    self.end_headers()
    self.wfile.write(self.body[:len(self.body) // 2] if self.cut else self.body)

  def log_message(self, *args):  # quiet
    pass


@pytest.fixture
def server(released, tmp_path):
  archive = tmp_path / "electra_small.zip"
  with zipfile.ZipFile(archive, "w") as zipped:
    for path in released["folder"].iterdir():
      zipped.write(path, f"electra_small/{path.name}")
  Release.body, Release.cut, Release.requests = archive.read_bytes(), False, 0
  httpd = http.server.HTTPServer(("127.0.0.1", 0), Release)
  thread = threading.Thread(target=httpd.serve_forever, daemon=True)
  thread.start()
  yield f"http://127.0.0.1:{httpd.server_address[1]}/{{name}}.zip"
  httpd.shutdown()


def test_release_zip_fetched_once_checked_and_never_left_half(released, server, tmp_path,
                                                             monkeypatch, capsys):
  cache = tmp_path / "electra"
  monkeypatch.setenv(by_name.URL_ENV, server)
  monkeypatch.setenv(by_name.CACHE_ENV, str(cache))
  Release.cut = True
  with pytest.raises(CheckpointError, match=r"electra_small: .* stopped after [\d,]+ of "
                     r"[\d,]+ bytes; run again"):
    open_weights("electra_small")
  assert os.listdir(cache / "releases") == []  # nothing half-written stays

  Release.cut = False
  weights = open_weights("electra_small")
  assert weights.format is original
  assert weights.location == str(cache / "releases" / "electra_small" / "electra_small" /
                                 "electra_small")
  assert weights.vocab().endswith(os.path.join("electra_small", "vocab.txt"))
  same_weights(weights, released["pair"], "pair")
  assert "fetching electra_small" in capsys.readouterr().err
  assert open_weights("electra_small").location == weights.location
  assert Release.requests == 2  # the cut one and the whole one: then the cache

  # A corrupt zip is refused, and an unreachable server named with what to do.
  monkeypatch.setenv(by_name.CACHE_ENV, str(tmp_path / "other"))
  Release.body = b"PK" + b"x" * 100
  with pytest.raises(CheckpointError, match="did not give a readable zip"):
    open_weights("electra_base")
  monkeypatch.setenv(by_name.URL_ENV, "http://127.0.0.1:9/{name}.zip")
  with pytest.raises(CheckpointError, match=r"could not fetch .*download https://"
                     r"storage.googleapis.com/electra-data/electra_base.zip and unzip"):
    open_weights("electra_base")


def test_a_local_path_wins_over_a_name(released, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  shutil.copytree(released["folder"], tmp_path / "electra_small")
  shutil.copytree(released["hf"] / "discriminator", tmp_path / "org" / "tiny")
  monkeypatch.setenv(by_name.URL_ENV, "http://127.0.0.1:9/{name}.zip")  # never asked
  assert open_weights("electra_small").format is original
  assert open_weights("org/tiny").format is huggingface
  # A path with more than org/name is a path, fetched from nowhere.
  assert by_name.resolve("./nowhere/model.ckpt-3") == "./nowhere/model.ckpt-3"


def test_a_local_path_wins_over_a_name(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert by_name.is_name("electra_base")
  (tmp_path / "electra_base").mkdir()  # now a local path, which wins
  assert not by_name.is_name("electra_base")
  (tmp_path / "export").mkdir()  # org/name under an existing folder: a path
  assert not by_name.is_name("export/model.ckpt-3")
  assert by_name.is_name("google/electra-small-discriminator@main")


def cut_short(folder):
  """The checkpoint's .data file of `folder`, cut to half (a full disk, a copy cut
  short); its path."""
  data_file = next(folder.glob("*.data-*"))
  data_file.write_bytes(data_file.read_bytes()[:data_file.stat().st_size // 2])
  return data_file


def test_a_checkpoint_cut_short_is_one_line_wherever_it_is_read(released, tmp_path,
                                                                monkeypatch, capsys):
  """Read through the same whole-read check as a run dir's own checkpoints: a path, a
  tool's --checkpoint and a release in the cache; never TensorFlow's IndexError."""
  copy = tmp_path / "copy"
  shutil.copytree(released["folder"], copy)
  data_file = cut_short(copy)
  with pytest.raises(CheckpointError) as info:
    open_weights(str(copy)).load_pair()
  assert str(info.value) == (f"{data_file}: Read less bytes than requested; the "
                             "checkpoint is cut short or damaged: copy or fetch it again")
  assert export_hf.main(["--checkpoint", str(copy), "--output", str(tmp_path / "hf")]) == 2
  assert capsys.readouterr().err == f"error: {info.value}\n"
  assert not (tmp_path / "hf").exists()
  # A release in the cache, cut short (a copy, a disk that filled): fetch it anew.
  cache = tmp_path / "electra"
  release = cache / "releases" / "electra_small"
  shutil.copytree(copy, release / "electra_small")
  monkeypatch.setenv(by_name.CACHE_ENV, str(cache))
  with pytest.raises(CheckpointError) as info:
    open_weights("electra_small").load_pair()
  assert str(info.value) == (
      f"{release / 'electra_small' / data_file.name}: Read less bytes than requested; the "
      f"checkpoint is cut short or damaged: delete {release} and run again to fetch it "
      "anew")


def test_the_cache_and_the_names_are_named_when_they_fail(tmp_path, monkeypatch):
  # A release name mistyped: the names it knows.
  with pytest.raises(CheckpointError) as info:
    open_weights("electra_huge")
  assert str(info.value).endswith(
      "; the releases by name are electra_small, electra_base, electra_large")
  # ELECTRA_CACHE a file, or a read-only folder: said to be ELECTRA_CACHE's.
  monkeypatch.setenv(by_name.URL_ENV, "http://127.0.0.1:9/{name}.zip")  # never reached
  (tmp_path / "file").write_text("")
  # A folder this user may not write in (root, whom modes do not stop, may not in /sys).
  read_only = tmp_path / "read_only"
  read_only.mkdir(mode=0o555)
  unwritable = str(read_only / "cache") if os.geteuid() else "/sys/electra_cache"
  for cache, why in ((str(tmp_path / "file"), "Not a directory"),
                     (unwritable, "Permission denied" if os.geteuid() else
                      "Operation not permitted")):
    monkeypatch.setenv(by_name.CACHE_ENV, cache)
    with pytest.raises(CheckpointError) as info:
      open_weights("electra_small")
    assert str(info.value).startswith(f"ELECTRA_CACHE={cache}: cannot write there ({why}: ")
    assert str(info.value).endswith("); set ELECTRA_CACHE to a writable folder")


def test_a_quoted_reason_is_cut_at_a_words_end():
  reason = ValueError("Repository Not Found for url: https://huggingface.co/api/models/"
                      "org/name. Please make sure you specified the correct repo_id and "
                      "repo_type.\nIf you are trying to access a private repo ...")
  assert cli.first_line(reason, limit=120) == (
      "Repository Not Found for url: https://huggingface.co/api/models/org/name. Please "
      "make sure you specified the correct ...")
  assert cli.first_line(ValueError("short")) == "short"
  assert cli.first_line(ValueError()) == "ValueError"
