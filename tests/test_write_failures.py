"""Every write failure ends in one line naming the path, in the real commands.

A read-only directory (chmod; as root, the commands run without root's licence to
ignore file permissions), a path under /proc, and a checkpoint save that fails halfway:
exit status 2, one line on stderr naming the path, no traceback, no *_temp directory.
"""

import ctypes
import errno
import glob
import json
import os
import shutil
import stat
import subprocess
import sys
import threading

import pytest

from tests.helpers import listing, make_data_dir, ROOT, shared_path
from tools import hparams_reference
from util import files

PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2
DEBUG_PRETRAINING = {"debug": True, "max_seq_length": 32, "train_batch_size": 4,
                     "num_train_steps": 1, "save_checkpoints_steps": 1,
                     "embedding_size": 16, "model_hparam_overrides": {
                         "hidden_size": 32, "num_hidden_layers": 1,
                         "num_attention_heads": 1, "intermediate_size": 64}}


def _obey_file_permissions():
  """Run in the child before exec: root loses the capabilities that bypass chmod."""
  libc = ctypes.CDLL(None, use_errno=True)
  for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
    if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
      raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def run(script, *args):
  """`script` (a command of the checkout's, "-m" or "-c") with `args`, in the test's folder."""
  # Level 3 silences TensorFlow's C++ start-up lines (e.g. CUDA probing), not ours. No
  # shared XLA cache (tests/conftest.py): TensorFlow logs an ERROR line for each entry it
  # reads (its text parse fails before the binary one succeeds), whatever the level,
  # and these tests count stderr's lines.
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT, TF_XLA_FLAGS="")
  if script.endswith(".py"):
    script = os.path.join(ROOT, script)
  return subprocess.run([sys.executable, script, *args], env=env, capture_output=True,
                        text=True, timeout=600,
                        preexec_fn=_obey_file_permissions if os.geteuid() == 0 else None)


# Several cases of one command in one process, so TensorFlow starts once, not once a
# case: each but the last through the command's main(argv), its exit status and stderr
# (file descriptor 2) kept; the last as the script itself, run as __main__, so the
# process's exit status and everything it writes until it ends are a real run's.
DRIVER = """
import importlib, json, os, runpy, sys, tempfile
script, cases = sys.argv[1], json.loads(sys.argv[2])
command = importlib.import_module(os.path.splitext(os.path.basename(script))[0])
results = []
for argv in cases[:-1]:
  with tempfile.TemporaryFile("w+") as err:
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(err.fileno(), 2)
    try:
      code = command.main(argv)
    except SystemExit as e:
      code = e.code
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
    err.seek(0)
    results.append([code, err.read()])
print("earlier cases:", json.dumps(results), flush=True)
sys.argv = [script] + cases[-1]
runpy.run_path(script, run_name="__main__")
"""


def run_cases(script, *cases):
  """The results of a command of the checkout's run with each argv of `cases`, all in
  one process (DRIVER), as CompletedProcess-es; the last is the process's own."""
  last = run("-c", DRIVER, os.path.join(ROOT, script), json.dumps(cases))
  line = next((l for l in last.stdout.splitlines() if l.startswith("earlier cases: ")),
              None)
  assert line, last.stderr[-3000:]
  return [subprocess.CompletedProcess(argv, code, "", err) for argv, (code, err) in
          zip(cases, json.loads(line[len("earlier cases: "):]))] + [last]


def assert_one_line_error(result, path, reason):
  """Exit status 2 and one line on stderr (besides training's progress lines)."""
  assert result.returncode == 2, result.stderr[-3000:]
  lines = [line for line in result.stderr.splitlines() if " | elapsed " not in line]
  assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
  assert path in lines[0] and reason in lines[0], lines[0]


def temp_dirs(root):
  """Half-written checkpoints (<prefix>_temp) or builds (<output>.tmp-<pid>) under root."""
  return [path for pattern in ("*_temp", "*.tmp-*")
          for path in glob.glob(os.path.join(root, "**", pattern), recursive=True)]


def read_only_dir(path):
  os.makedirs(path)
  os.chmod(path, 0o555)
  return str(path)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  return make_data_dir(tmp_path_factory.mktemp("records"), 32, num_lines=200)[0]


@pytest.mark.slow
def test_run_pretraining(data_dir, tmp_path):
  locked = read_only_dir(tmp_path / "locked")
  # The last: a save that fails after TensorFlow began writing its <prefix>_temp shards
  # (here the data file's final name is taken by a directory; a full disk fails the
  # same way).
  half = tmp_path / "half"
  os.makedirs(half / "ckpt-1.data-00000-of-00001" / "taken")
  cases = ((locked, locked, "Permission denied"),
           ("/proc/electra_test", "/proc/electra_test", "No such file or directory"),
           (str(half), str(half / "ckpt-1_temp"), "Is a directory"))
  results = run_cases("run_pretraining.py", *(
      ["--data-dir", data_dir, "--model-name", "w", "--hparams",
       json.dumps({**DEBUG_PRETRAINING, "model_dir": model_dir})]
      for model_dir, _, _ in cases))
  for result, (_, path, reason) in zip(results, cases):
    assert_one_line_error(result, path, reason)
  assert not temp_dirs(str(tmp_path))


@pytest.mark.slow
def test_run_finetuning(tmp_path):
  data = tmp_path / "data"
  for split, lines in (("train", 41), ("dev", 11)):
    folder = data / "finetuning_data" / "sst"
    os.makedirs(folder, exist_ok=True)
    with open(shared_path("glue", "SST-2", f"{split}.tsv"), encoding="utf-8") as f:
      (folder / f"{split}.tsv").write_text("".join(line for _, line in zip(range(lines), f)))
  shutil.copyfile(shared_path("vocab", "bert_uncased_vocab.txt"), data / "vocab.txt")
  locked = read_only_dir(tmp_path / "locked")
  # No serving export or curves: results_dir's failure comes after the training, at
  # the results, which neither writes.
  hparams = {"debug": True, "train_batch_size": 8, "max_seq_length": 16,
             "num_train_epochs": 1, "export_serving": False, "write_curves": False}
  cases = (("model_dir", f"{locked}/sst", f"{locked}/sst: ", "Permission denied"),
           ("results_dir", "/proc/electra_test", "/proc/electra_test",
            "No such file or directory"))
  results = run_cases("run_finetuning.py", *(
      ["--task", "sst", "--data-dir", str(data), "--hparams",
       json.dumps({**hparams, name: value})] for name, value, _, _ in cases))
  for result, (_, _, path, reason) in zip(results, cases):
    assert_one_line_error(result, path, reason)
  assert not temp_dirs(str(tmp_path))


@pytest.mark.slow
def test_build_pretraining_dataset_and_tools(tmp_path):
  corpus = tmp_path / "corpus"
  os.makedirs(corpus)
  with open(shared_path("corpus", "english_corpus.txt"), encoding="utf-8") as f:
    (corpus / "a.txt").write_text("".join(line for _, line in zip(range(200), f)))
  vocab = shared_path("vocab", "bert_uncased_vocab.txt")
  locked = read_only_dir(tmp_path / "locked")
  for output_dir, path, reason in (
      (f"{locked}/records", locked, "cannot write in"),
      ("/proc/electra_test/records", "/proc/electra_test", "No such file or directory")):
    result = run("build_pretraining_dataset.py", "--corpus-dir", str(corpus),
                 "--vocab-file", vocab, "--output-dir", output_dir, "--no-progress")
    assert_one_line_error(result, path, reason)

  for output, reason in ((f"{locked}/tokens.jsonl", "Permission denied"),
                         ("/proc/electra_test.jsonl", "No such file or directory")):
    result = run("-m", "tools.tokenize", "--vocab-file", vocab, "--input",
                 str(corpus / "a.txt"), "--output", output)
    assert_one_line_error(result, output, reason)
  assert not temp_dirs(str(tmp_path))


def _tree(root):
  """{relative path: contents} of every file under root."""
  return {os.path.relpath(os.path.join(folder, name), root):
          open(os.path.join(folder, name), encoding="utf-8").read()
          for folder, _, names in os.walk(root) for name in names}


@pytest.mark.parametrize("temp_name", ["", "out.tmp-1"])
def test_atomic_directory_shows_only_whole_directories(tmp_path, temp_name):
  target = tmp_path / "out"

  def write(old_files, fail):
    """Writes two files through atomic_directory, checking target meanwhile; `fail`:
    raise between them."""
    with files.atomic_directory(str(target), temp_name) as tmp:
      assert os.path.dirname(tmp) == str(tmp_path)  # a sibling: the rename stays on disk
      (tmp_path / os.path.basename(tmp) / "a.txt").write_text("new a")
      assert _tree(str(target)) == old_files  # not there yet, or still the old one
      if fail:
        raise RuntimeError("failed halfway")
      (tmp_path / os.path.basename(tmp) / "sub").mkdir()
      (tmp_path / os.path.basename(tmp) / "sub" / "b.txt").write_text("new b")
      assert _tree(str(target)) == old_files

  # A new target: nothing there until the block ends, then all of it.
  with pytest.raises(RuntimeError):
    write({}, fail=True)
  assert os.listdir(tmp_path) == []  # no target, no temp directory
  write({}, fail=False)
  whole = {"a.txt": "new a", os.path.join("sub", "b.txt"): "new b"}
  assert _tree(str(target)) == whole and os.listdir(tmp_path) == ["out"]
  # An existing target: a failure leaves it as it was and nothing beside it.
  (target / "a.txt").write_text("old a")
  (target / "old.txt").write_text("old")
  old = _tree(str(target))
  with pytest.raises(RuntimeError):
    write(old, fail=True)
  assert _tree(str(target)) == old and os.listdir(tmp_path) == ["out"]
  # A success replaces it whole: no file of the old one survives, no ".old" left.
  write(old, fail=False)
  assert _tree(str(target)) == whole and os.listdir(tmp_path) == ["out"]


def test_atomic_directory_through_a_link_replaces_the_folder_it_names(tmp_path):
  (tmp_path / "runs" / "out").mkdir(parents=True)
  (tmp_path / "runs" / "out" / "old.txt").write_text("old")
  (tmp_path / "out").symlink_to("runs/out")
  with files.atomic_directory(str(tmp_path / "out")) as tmp:
    with open(os.path.join(tmp, "a.txt"), "w", encoding="utf-8") as f:
      f.write("new a")
  assert os.readlink(tmp_path / "out") == "runs/out"
  assert _tree(str(tmp_path)) == {os.path.join("runs", "out", "a.txt"): "new a"}
  assert sorted(os.listdir(tmp_path)) == ["out", "runs"]
  assert os.listdir(tmp_path / "runs") == ["out"]


def full_device(folder):
  """A character device as /dev/full (every write fails: ENOSPC), made in `folder`: a
  write that wrongly put a file in its place replaces this one, not the system's."""
  path = folder / "full"
  try:
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 7))
  except PermissionError:
    if os.environ.get("CI"):
      raise
    pytest.skip("os.mknod is not permitted here (needs root, or CAP_MKNOD)")
  return path


def test_atomic_write_writes_through_what_a_rename_would_replace(tmp_path):
  """A FIFO, a device or a link to one is written as a stream, as a shell's redirection
  writes it (a rename would put a file in its place); a link to a file, or to none yet,
  has that file replaced whole and stays a link."""
  fifo = tmp_path / "fifo"
  os.mkfifo(fifo)
  read = []
  # A daemon: a write that misses the FIFO leaves it waiting for good.
  reader = threading.Thread(target=lambda: read.append(fifo.read_text()), daemon=True)
  reader.start()
  with files.atomic_write(str(fifo)) as f:
    f.write("through the pipe\n")
  reader.join(timeout=60)
  assert read == ["through the pipe\n"] and stat.S_ISFIFO(os.lstat(fifo).st_mode)
  # Every write to the device fails (ENOSPC): the error names the path given, and the
  # device stays, as does a link to one (the system's own: only the link could go).
  device = full_device(tmp_path)
  (tmp_path / "to_full").symlink_to("/dev/full")
  for path, size in ((str(device), 10), (str(tmp_path / "to_full"), 100_000)):
    with pytest.raises(OSError) as failed:  # at close; at the write
      with files.atomic_write(path) as f:
        f.write("x" * size)
    assert failed.value.errno == errno.ENOSPC and failed.value.filename == path
  assert stat.S_ISCHR(os.lstat(device).st_mode)
  # A link to a pipe's end, as /dev/stdout is to a piped standard output's.
  pipe_out, pipe_in = os.pipe()
  (tmp_path / "to_pipe").symlink_to(f"/proc/self/fd/{pipe_in}")
  with files.atomic_write(str(tmp_path / "to_pipe"), "wb") as f:
    f.write(b"through the link\n")
  os.close(pipe_in)
  with os.fdopen(pipe_out, "rb") as f:
    assert f.read() == b"through the link\n"
  # A link to a file: the file is replaced whole (a new one, written aside first).
  target = tmp_path / "target.txt"
  target.write_text("old\n")
  (tmp_path / "link.txt").symlink_to("target.txt")
  old_inode = target.stat().st_ino
  with files.atomic_write(str(tmp_path / "link.txt")) as f:
    f.write("new\n")
    assert target.read_text() == "old\n"
  assert target.read_text() == "new\n" and target.stat().st_ino != old_inode
  (tmp_path / "dangling").symlink_to("sub/made.txt")
  with files.atomic_write(str(tmp_path / "dangling")) as f:
    f.write("made\n")
  assert (tmp_path / "sub" / "made.txt").read_text() == "made\n"
  assert {name: os.readlink(tmp_path / name) for name in os.listdir(tmp_path)
          if os.path.islink(tmp_path / name)} == {
              "to_full": "/dev/full", "to_pipe": f"/proc/self/fd/{pipe_in}",
              "link.txt": "target.txt", "dangling": "sub/made.txt"}
  assert sorted(os.listdir(tmp_path)) == [  # and no temporary file left
      "dangling", "fifo", "full", "link.txt", "sub", "target.txt", "to_full", "to_pipe"]


def test_an_output_that_is_a_device_or_a_link_to_stdout_is_written_through(tmp_path,
                                                                          capsys):
  """tools.hparams_reference (as every --output, through atomic_write): a full device's
  error in one line, the device kept; a link to standard output prints the page."""
  device = full_device(tmp_path)
  (tmp_path / "stdout").symlink_to("/proc/self/fd/1")
  before = listing(tmp_path)
  assert hparams_reference.main(["--output", str(device)]) == 2
  assert capsys.readouterr().err == f"error: {device}: No space left on device\n"
  result = subprocess.run([sys.executable, "-m", "tools.hparams_reference", "--output",
                           str(tmp_path / "stdout")], cwd=tmp_path, capture_output=True,
                          text=True, check=False, env=dict(os.environ, PYTHONPATH=ROOT))
  assert result.returncode == 0 and result.stderr == ""
  assert result.stdout == hparams_reference.reference()
  assert listing(tmp_path) == before
