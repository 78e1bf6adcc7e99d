"""Wapiti as a system of the side-by-side benchmark: the files its runner writes and reads back,
the command it trains with, the scorer it is handed to, and its rows beside textorch's.

A fake ``wapiti`` (a Python script) stands in for the real binary, so that these tests run
anywhere; one test uses the real binary when it is built (``$WAPITI`` or
``/tmp/wapiti-build/wapiti``) and the shared GROBID data is present.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.peers import bench_data
from benchmarks.peers import bench_table
from benchmarks.peers import bench_vs_delft
from benchmarks.peers import f1_bootstrap
from benchmarks.peers import suite_results
from benchmarks.peers import suite_runner
from benchmarks.peers import suite_training
from benchmarks.peers import wapiti_peer
from benchmarks.peers import wapiti_runner

RUNNER = Path(wapiti_runner.__file__)

FAKE_WAPITI = r'''#!{python}
"""A stand-in for wapiti: ``train`` records how it was called and what it was given; ``label``
appends a label to every input line by a fixed rule (May -> I-<month>, 2001 -> I-<year>,
anything else -> <other>)."""
import json, sys
args = sys.argv[1:]
if args[0] == "train":
    training, model = args[-2], args[-1]
    with open(model, "w") as out:
        json.dump({{"args": args, "training": open(training).read()}}, out)
elif args[0] == "label":
    model, source, target = args[2], args[3], args[4]
    rule = {{"May": "I-<month>", "2001": "I-<year>"}}
    with open(source) as lines, open(target, "w") as out:
        for line in lines:
            fields = line.split()
            out.write(line.rstrip("\n") + ("\t" + rule.get(fields[0], "<other>") if fields else "") + "\n")
else:
    sys.exit(2)
'''


def fake_wapiti(tmp_path: Path) -> Path:
    path = tmp_path / "fake-wapiti"
    path.write_text(FAKE_WAPITI.format(python=sys.executable), encoding="utf-8")
    path.chmod(0o755)
    return path


def write(path: Path, sequences: list[list[str]]) -> str:
    path.write_text("".join("\n".join(lines) + "\n\n" for lines in sequences), encoding="utf-8")
    return str(path)


TRAIN = [["June june LINESTART I-<month>", "2002 2002 LINEEND I-<year>"]]
VALID = [["May may LINESTART I-<month>", "3 3 LINEIN I-<day>", "2001 2001 LINEEND I-<year>"]]
TEST = [["May may LINESTART I-<month>", "2001 2001 LINEEND I-<year>"],
        ["June june LINESTART I-<month>", "2002 2002 LINEIN I-<year>", "x x LINEEND <year>"]]
"""The fake tags the first test sequence right (2 entities found) and misses both entities of
the second: true positives 2, false positives 0, false negatives 2, F1 2/3."""


def split_files(tmp_path: Path) -> bench_data.TaskFiles:
    paths = {role: write(tmp_path / f"{role}.txt", blocks) for role, blocks in
             (("train", TRAIN), ("valid", VALID), ("test", TEST))}
    return bench_data.TaskFiles("date", "grobid", paths, paths)


def shared_template(tmp_path: Path, monkeypatch) -> Path:
    data = tmp_path / "shared-data"
    template = data / "grobid" / "date" / "date.crf-template"
    template.parent.mkdir(parents=True)
    template.write_text("U00:%x[0,0]\nB\n", encoding="utf-8")
    monkeypatch.setenv("TEXTORCH_SHARED_DATA", str(data))
    return template


def test_blocks_round_trip_with_and_without_the_label_column(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("a A x I-<a>\nb B y <a>\n \nc C z I-<b>\n\n\n", encoding="utf-8")
    blocks = wapiti_runner.read_blocks(source)
    assert blocks == [["a A x I-<a>", "b B y <a>"], ["c C z I-<b>"]]
    assert wapiti_runner.write_blocks(tmp_path / "same.txt", blocks) == 3
    assert wapiti_runner.read_blocks(tmp_path / "same.txt") == blocks
    wapiti_runner.write_blocks(tmp_path / "bare.txt", blocks, labelled=False)
    assert (tmp_path / "bare.txt").read_text(encoding="utf-8") == "a A x\nb B y\n\nc C z\n\n"


def test_predicted_labels_are_read_from_the_last_column_and_counted(tmp_path):
    tagged = tmp_path / "out.txt"
    tagged.write_text("a A x\tI-<a>\nb B y\t<a>\n\nc C z\t<other>\n\n", encoding="utf-8")
    assert wapiti_runner.read_labels(tagged, [2, 1]) == [["I-<a>", "<a>"], ["<other>"]]
    with pytest.raises(SystemExit, match="2 sequences read back for 3 written; first mismatch at sequence 3"):
        wapiti_runner.read_labels(tagged, [2, 1, 4])
    with pytest.raises(SystemExit, match="first mismatch at sequence 2"):
        wapiti_runner.read_labels(tagged, [2, 2])


def test_train_runs_grobids_command_on_train_and_valid_and_scores_the_test_split(tmp_path, monkeypatch, capsys):
    template = shared_template(tmp_path, monkeypatch)
    files = split_files(tmp_path)
    model = tmp_path / "models" / "date-s1.wapiti"
    predictions = tmp_path / "pred.json"
    wapiti_runner.main(["train", "--wapiti", str(fake_wapiti(tmp_path)), "--template", str(template), "--task", "date",
                        "--seed", "1", "--train", files.textorch["train"], "--valid", files.textorch["valid"],
                        "--test", files.textorch["test"], "--model", str(model), "--predictions", str(predictions)])
    recorded = json.loads(model.read_text())
    training_file = str(model) + ".train"
    assert recorded["args"] == ["train", "--nthread", "1", "-e", "0.00001", "-w", "20", "-i", "2000",
                                "-p", str(template), training_file, str(model)]
    assert wapiti_runner.read_blocks(training_file) == TRAIN + VALID  # no validation set: GROBID trains on both
    assert "I-<" not in Path(str(model) + ".test.in").read_text()  # labelled input would be read as a feature
    written = json.loads(predictions.read_text())
    assert written["gold"] == [["B-<month>", "B-<year>"], ["B-<month>", "B-<year>", "I-<year>"]]
    assert written["pred"] == [["B-<month>", "B-<year>"], ["O", "O", "O"]]
    payload = json.loads(capsys.readouterr().out.split("BENCH_JSON ", 1)[1])
    assert payload["system"] == "wapiti" and payload["n_train_sequences"] == 2 and payload["n_train_tokens"] == 5
    assert payload["model_mb"] == pytest.approx(model.stat().st_size / 2**20)
    scored = suite_training.score_predictions(predictions)
    assert scored["test_counts"] == [[2, 0, 0], [0, 0, 2]]
    assert scored["f1_counts"] == pytest.approx(2 / 3)


def test_the_orchestrator_trains_wapiti_once_per_task_and_seed_beside_the_chosen_systems(tmp_path, monkeypatch):
    shared_template(tmp_path, monkeypatch)
    files = {("date", seed): split_files(tmp_path) for seed in (1, 2)}
    r = suite_runner.Runner(tmp_path / "work", None, threads=1, wapiti=str(fake_wapiti(tmp_path)))
    jobs = [{"key": "date-A-defaults", "task": "date", "architecture": "A", "app": "grobid:date"},
            {"key": "date-B-defaults", "task": "date", "architecture": "B", "app": "grobid:date"}]
    runs = suite_training.train_all(r, jobs, files, [1, 2], Path("vectors.txt"), systems=("wapiti",))
    assert r.failures == []
    assert [(run["system"], run["key"], run["seed"]) for run in runs] == [("wapiti", "date-wapiti", 1),
                                                                         ("wapiti", "date-wapiti", 2)]
    assert all(run["f1"] == pytest.approx(2 / 3) and run["test_counts"] == [[2, 0, 0], [0, 0, 2]] for run in runs)
    assert wapiti_peer.model_path(r.work, "date", 2).exists()


def test_systems_are_checked_and_a_missing_binary_says_how_to_build_it(tmp_path):
    assert wapiti_peer.parse_systems("textorch, delft", None) == ["textorch", "delft"]
    with pytest.raises(SystemExit, match="choose among delft, textorch, wapiti"):
        wapiti_peer.parse_systems("textorch,crfpp", None)
    with pytest.raises(SystemExit, match="needs --wapiti PATH: build it .*build.sh"):
        wapiti_peer.parse_systems("wapiti", None)
    with pytest.raises(SystemExit, match="no such file"):
        wapiti_peer.parse_systems("wapiti", str(tmp_path / "absent"))


def test_the_whole_file_repeats_the_test_split_to_the_token_count_without_labels(tmp_path):
    test = Path(write(tmp_path / "test.txt", TEST))
    written = wapiti_peer.write_whole_file(tmp_path, "date", test, 12)
    assert written["copies"] == 3 and written["n_tokens"] == 15 and written["n_sequences"] == 6
    bare = wapiti_runner.read_blocks(written["paths"]["unlabelled"])
    assert bare == [[" ".join(line.split()[:-1]) for line in lines] for lines in TEST] * 3
    assert wapiti_runner.read_blocks(written["paths"]["labelled"]) == TEST * 3
    assert wapiti_peer.write_whole_file(tmp_path / "again", "date", test, 12)["digest"] == written["digest"]


def test_measure_reports_its_child_alone(tmp_path):
    child = "x = bytearray(80 * 2**20); x[::4096] = b'1' * len(x[::4096])"
    done = subprocess.run([sys.executable, str(RUNNER), "measure", "--", sys.executable, "-c", child],
                          capture_output=True, text=True, check=True, cwd=RUNNER.parent)
    payload = json.loads(done.stdout.split("BENCH_JSON ", 1)[1])
    assert payload["peak_rss_mb"] >= 80 and payload["command"][:2] == [sys.executable, "-c"]
    failed = subprocess.run([sys.executable, str(RUNNER), "measure", "--", sys.executable, "-c", "raise SystemExit(3)"],
                            capture_output=True, text=True, cwd=RUNNER.parent)
    assert failed.returncode != 0 and "exit 3" in failed.stderr


def _run(system: str, key: str, seed: int, counts: list[list[int]], whole_s: float) -> dict:
    gold = [["B-<a>"]] * len(counts)
    return {"system": system, "key": key, "task": "date", "seed": seed, "architecture": "A", "preset": "grobid:date",
            "test_counts": counts, "gold_digest": f1_bootstrap.gold_digest(gold),
            "f1_counts": float(f1_bootstrap.f1(sum(map(__import__("numpy").array, counts)))), "whole_s": whole_s,
            "f1": 0.0, "train_tokens_per_s": 1.0, "whole_tokens_per_s": 1.0, "epochs": 3}


def test_peer_rows_set_each_system_against_wapiti_on_the_seeds_both_ran():
    wapiti = [_run("wapiti", "date-wapiti", s, [[1, 0, 0], [1, 0, 0], [0, 1, 1]], 2.0) for s in (1, 2)]
    textorch = [_run("textorch", "date-A-defaults", 1, [[1, 0, 0], [1, 0, 0], [1, 0, 0]], 30.0)]
    whole = [{"kind": "whole_file", "key": "date-whole-file", "task": "date", "n_tokens": 1000,
              "systems": {"wapiti": {"job": "date-wapiti", "wall_s": [0.5, 0.1, 0.2], "peak_rss_mb": [3.0, 4.0],
                                     "model_mb": 0.1}}},
             {"kind": "whole_file", "key": "date-whole-file", "task": "date", "n_tokens": 1000,
              "systems": {"textorch": {"job": "date-A-defaults", "wall_s": [2.0, 4.0, 5.0], "peak_rss_mb": [900.0],
                                       "model_mb": 1.0}}},
             {"kind": "whole_file", "key": "date-whole-file", "task": "date", "n_tokens": 1000,  # another job's
              "systems": {"textorch": {"job": "date-B-defaults", "wall_s": [9.0], "peak_rss_mb": [1.0], "model_mb": 9.0}}}]
    rows = wapiti_peer.peer_rows(wapiti + textorch, whole)
    f1_row = rows[0]
    assert f1_row["wapiti"] == pytest.approx(100 * 2 / 3)  # pooled over both seeds: tp 4, fp 2, fn 2
    paired = f1_row["textorch"]  # seed 1 alone, the one textorch ran
    assert paired["seeds"] == [1] and paired["wapiti"] == pytest.approx(100 * 2 / 3)
    assert paired["value"] == pytest.approx(100.0) and paired["diff"] == pytest.approx(100 / 3)
    assert paired["ci95"][0] <= paired["diff"] <= paired["ci95"][1]
    assert f1_row["delft"] is None
    assert all("(date-A-defaults)" in row["measure"] for row in rows)  # B ran no training: no rows of its own
    by_measure = {row["measure"].replace(" (date-A-defaults)", "").split(" (")[0]: row for row in rows[1:]}
    assert by_measure["training, median over seeds"]["textorch"] == 30.0
    assert by_measure["training, median over seeds"]["wapiti"] == 2.0
    rate = by_measure["tag a 1,000-token file, whole process"]
    assert rate["wapiti"] == pytest.approx(1000 / 0.2) and rate["textorch"] == pytest.approx(1000 / 4.0)
    assert wapiti_peer._cells(rate, "textorch") == ("250", "0.05x")
    assert by_measure["peak RSS of the tagging process"]["wapiti"] == 4.0
    assert by_measure["model size"]["textorch"] == 1.0  # job A's model, not B's


def test_a_table_pools_a_wapiti_file_with_a_textorch_file_of_the_same_mode(capsys, tmp_path):
    common = {"mode": "full-early-stopping", "method": bench_vs_delft.METHOD_VERSION, "settings": {"seeds": [1]},
              "wall_s": 1.0, "machine": {}}
    wapiti = {**common, "command": "wapiti", "train_runs": [_run("wapiti", "date-wapiti", 1, [[1, 0, 0], [1, 0, 0], [0, 1, 1]], 1.0)],
              "tagging": []}
    textorch = {**common, "command": "textorch", "train_runs": [_run("textorch", "date-N-defaults", 1,
                                                                     [[1, 0, 0]] * 3, 9.0)], "tagging": []}
    paths = []
    for name, payload in (("w.json", wapiti), ("t.json", textorch)):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(payload))
    pooled = suite_results.pooled([wapiti, textorch])
    assert [job["key"] for job in suite_results.jobs_of(textorch, pooled["train_runs"])] == ["date-N-defaults"]
    assert pooled["peers"][0]["textorch"]["diff"] == pytest.approx(100 / 3)
    suite_results.reprint(paths)
    out = capsys.readouterr().out
    assert "| date | test F1 (date-N-defaults), seeds 1 pooled (Wapiti per seed: 66.67) | 66.67 | 100.00 | +33.33 pt" in out


def _real_wapiti() -> str | None:
    found = os.environ.get("WAPITI") or "/tmp/wapiti-build/wapiti"
    return found if Path(found).is_file() else None


@pytest.mark.skipif(_real_wapiti() is None, reason="no wapiti binary: set WAPITI or build it with "
                    "bash ../shared/peers/wapiti/build.sh /tmp/wapiti-build")
def test_the_real_wapiti_learns_grobid_dates(tmp_path):
    try:
        source = bench_data.shared_data("grobid/date/date-220311.train")
        template = wapiti_peer.template("date")
    except SystemExit as missing:
        pytest.skip(f"shared GROBID date data absent: {missing}")
    blocks = wapiti_runner.read_blocks(source)
    paths = {role: write(tmp_path / f"{role}.txt", part) for role, part in
             (("train", blocks[:150]), ("valid", blocks[150:180]), ("test", blocks[180:230]))}
    predictions = tmp_path / "pred.json"
    done = subprocess.run([sys.executable, str(RUNNER), "train", "--wapiti", _real_wapiti(), "--template", str(template),
                           "--task", "date", "--seed", "1", *[a for role, p in paths.items() for a in (f"--{role}", p)],
                           "--model", str(tmp_path / "m.wapiti"), "--predictions", str(predictions)],
                          capture_output=True, text=True, cwd=RUNNER.parent)
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout.split("BENCH_JSON ", 1)[1])
    assert payload["n_train_sequences"] == 180 and payload["iterations"] >= 10
    assert suite_training.score_predictions(predictions)["f1_counts"] > 0.8


def test_a_process_cpu_seconds_are_its_own(tmp_path):
    """Runner.run gives each process its CPU seconds (children's rusage around it), at least what
    the process itself counted: a measure that other load on the machine does not inflate."""
    r = suite_runner.Runner(tmp_path, None)
    burn = ("import json, time\nstart = time.process_time()\nwhile time.process_time() - start < 0.3: pass\n"
            "print('BENCH_JSON ' + json.dumps({'own_cpu_s': time.process_time()}))")
    payload, _ = r.run("burn", [sys.executable, "-c", burn])
    assert payload["process_cpu_s"] >= payload["own_cpu_s"] >= 0.3
    quiet, _ = r.run("sleep", [sys.executable, "-c", "import time; time.sleep(0.3); print('BENCH_JSON {}')"])
    assert quiet["process_cpu_s"] < payload["own_cpu_s"]  # the earlier process is not counted again


def test_identical_reruns_are_pooled_once_on_request_and_differing_ones_always_refused():
    common = {"mode": "full-early-stopping", "method": bench_vs_delft.METHOD_VERSION, "settings": {"seeds": [1]},
              "wall_s": 1.0, "machine": {}, "tagging": []}
    first = {**common, "command": "a", "train_runs": [_run("textorch", "date-A-defaults", 1, [[1, 0, 0]], 9.0),
                                                      _run("delft", "date-A-defaults", 1, [[0, 0, 1]], 9.0)]}
    again = {**common, "command": "b", "train_runs": [_run("textorch", "date-A-defaults", 1, [[1, 0, 0]], 7.0),
                                                      _run("wapiti", "date-wapiti", 1, [[1, 0, 0]], 1.0)]}
    with pytest.raises(SystemExit, match="seed 1 is in more than one file"):
        suite_results.pooled([first, again])
    both = suite_results.pooled([first, again], identical_once=True)
    assert both["identical_runs_dropped"] == ["textorch date-A-defaults seed 1"]
    assert [(r["system"], r["whole_s"]) for r in both["train_runs"]] == [("textorch", 9.0), ("delft", 9.0), ("wapiti", 1.0)]
    assert both["peers"][0]["delft"]["diff"] == pytest.approx(-100.0)  # DeLFT's run paired with Wapiti's
    changed = {**again, "train_runs": [_run("textorch", "date-A-defaults", 1, [[0, 1, 1]], 7.0)]}
    with pytest.raises(SystemExit, match="in more than one file with different test counts"):
        suite_results.pooled([first, changed], identical_once=True)


def test_the_suites_f1_row_of_one_system_alone_counts_its_seeds():
    job = {"key": "date-A-defaults", "task": "date", "architecture": "A", "app": "grobid:date"}
    runs = [{**_run("textorch", job["key"], seed, [[1, 0, 0]], 1.0), "f1": f1} for seed, f1 in ((1, 0.9), (2, 0.7))]
    row = next(r for r in bench_table.build_rows([job], runs, []) if r["metric"].startswith("test F1"))
    assert row["metric"] == "test F1, mean of 2 seed(s)" and row["textorch"] == pytest.approx(0.8)
    assert row["delft"] is None and row["diff_points"] is None


def test_the_one_sequence_file_is_the_whole_files_first_sequence(tmp_path):
    test = Path(write(tmp_path / "test.txt", TEST))
    written = wapiti_peer.write_whole_file(tmp_path, "date", test, 12)
    for kind in ("unlabelled", "labelled"):
        one = wapiti_peer.write_one_sequence_file(tmp_path, "date", Path(written["paths"][kind]), f"one-{kind}.txt")
        assert wapiti_runner.read_blocks(one) == wapiti_runner.read_blocks(written["paths"][kind])[:1]


def test_start_up_rows_and_whole_file_rows_of_a_run_without_training():
    """``--whole-files-only`` trains nothing: its table still sets every system's whole-file and
    start-up measures against Wapiti's."""
    whole = [{"kind": "whole_file", "key": "date-whole-file", "task": "date", "n_tokens": 1000,
              "systems": {"wapiti": {"job": "date-wapiti", "wall_s": [0.5], "cpu_s": [0.4], "peak_rss_mb": [3.0],
                                     "model_mb": 0.1, "startup_wall_s": [0.03, 0.02, 0.9],
                                     "startup_cpu_s": [0.02, 0.02, 0.02]},
                          "textorch": {"job": "date-A", "wall_s": [2.0], "cpu_s": [1.5], "peak_rss_mb": [900.0],
                                       "model_mb": 1.0, "startup_wall_s": [2.5, 2.4, 2.6],
                                       "startup_cpu_s": [2.2, 2.0, 2.1]}}}]
    rows = wapiti_peer.peer_rows([], whole)
    assert rows and all(row["task"] == "date" and "(date-A)" in row["measure"] for row in rows)
    startup = [row for row in rows if row["measure"].startswith("start-up")]
    assert [row["kind"] for row in startup] == ["seconds", "seconds"]
    assert startup[0]["wapiti"] == 0.03 and startup[0]["textorch"] == 2.5  # medians of the wall times
    assert "median of 3" in startup[0]["measure"]
    assert startup[1]["textorch"] == 2.1 and startup[1]["wapiti"] == 0.02  # CPU seconds
    assert wapiti_peer._cells(startup[0], "textorch") == ("2.5", "83.33x")
    rate = next(row for row in rows if row["measure"].startswith("tag a 1,000-token file"))
    assert rate["textorch"] == 500.0 and rate["wapiti"] == 2000.0


def test_whole_file_engines_give_seq_tag_their_options(tmp_path):
    """``--textorch-engine onnx-int8`` exports the int8 files and tags with them, the others with their
    engine; ``default`` (the suite's default) gives no engine option, as a user types it."""
    engines = ("default", "torch", "onnx", "onnx-int8")
    runners = {engine: suite_runner.Runner(tmp_path, None, textorch_engine=engine) for engine in engines}
    assert suite_runner.Runner(tmp_path, None).textorch_engine == "default"
    assert {engine: r.engine_options() for engine, r in runners.items()} == {
        "default": [], "torch": ["--engine", "torch"], "onnx": ["--engine", "onnx"],
        "onnx-int8": ["--engine", "onnx", "--quantized"]}
    assert {engine: r.export_options() for engine, r in runners.items()} == {
        "default": [], "torch": None, "onnx": [], "onnx-int8": ["--quantize"]}  # the int8 engine's export makes the int8 files


SLOW_WAPITI = r'''#!{python}
"""A stand-in for a wapiti train that would run for minutes: on SIGINT it prints one more
iteration and writes its model, as wapiti's interrupt rule does."""
import signal, sys, time
args = sys.argv[1:]
if args[0] == "label":
    model, source, target = args[2], args[3], args[4]
    with open(source) as lines, open(target, "w") as out:
        for line in lines:
            out.write(line.rstrip("\n") + ("\t<other>" if line.split() else "") + "\n")
    sys.exit(0)
def stop(*_):
    print("  [   7] obj=12.5  act=40  err= 0.30%/ 2.00% time=0.01s/0.07s", flush=True)
    open(args[-1], "w").write("model")
    sys.exit(0)
signal.signal(signal.SIGINT, stop)
print("  [   1] obj=99.0  act=50  err=40.00%/90.00% time=0.01s/0.01s", flush=True)
time.sleep(60)
sys.exit(3)
'''


def test_a_time_limit_stops_wapiti_with_its_model_and_a_finished_run_is_reused(tmp_path, monkeypatch, capsys):
    template = shared_template(tmp_path, monkeypatch)
    files = split_files(tmp_path)
    slow = tmp_path / "slow-wapiti"
    slow.write_text(SLOW_WAPITI.format(python=sys.executable), encoding="utf-8")
    slow.chmod(0o755)
    model = tmp_path / "models" / "header-s1.wapiti"
    predictions = tmp_path / "pred.json"
    argv = ["train", "--wapiti", str(slow), "--template", str(template), "--task", "header", "--seed", "1",
            "--train", files.textorch["train"], "--valid", files.textorch["valid"], "--test", files.textorch["test"],
            "--model", str(model), "--predictions", str(predictions), "--reuse", "--time-limit", "1"]
    started = time.perf_counter()
    wapiti_runner.main(argv)
    assert time.perf_counter() - started < 30  # stopped at the limit, not after its minute
    payload = json.loads(capsys.readouterr().out.split("BENCH_JSON ", 1)[1])
    assert payload["stopped_at_time_limit"] and payload["iterations"] == 7
    assert payload["last_training_error"] == "0.30%/2.00%"  # tokens / sequences, as wapiti prints them
    first = json.loads(predictions.read_text())
    # the same split again: reported from the record beside the model, wapiti not started
    predictions.unlink()
    broken = tmp_path / "broken-wapiti"
    broken.write_text("#!/bin/sh\nexit 9\n", encoding="utf-8")
    broken.chmod(0o755)
    wapiti_runner.main([a if a != str(slow) else str(broken) for a in argv])
    again = json.loads(capsys.readouterr().out.split("BENCH_JSON ", 1)[1])
    assert again["reused"].endswith("header-s1.wapiti.result.json") and again["iterations"] == 7
    assert json.loads(predictions.read_text()) == first
    # another split (or template) is trained again: the broken binary fails
    changed = write(tmp_path / "other-test.txt", TEST[:1])
    with pytest.raises(SystemExit, match="exit 9"):
        wapiti_runner.main([changed if a == files.textorch["test"] else a
                            for a in [a if a != str(slow) else str(broken) for a in argv]])


def test_an_iteration_cap_replaces_grobids_2000_and_a_run_under_another_cap_is_not_reused(tmp_path, monkeypatch,
                                                                                            capsys):
    template = shared_template(tmp_path, monkeypatch)
    files = split_files(tmp_path)
    model = tmp_path / "models" / "header-s2.wapiti"
    argv = ["train", "--wapiti", str(fake_wapiti(tmp_path)), "--template", str(template), "--task", "header",
            "--seed", "2", "--train", files.textorch["train"], "--valid", files.textorch["valid"],
            "--test", files.textorch["test"], "--model", str(model), "--reuse", "--iterations", "245"]
    wapiti_runner.main(argv)
    recorded = json.loads(model.read_text())
    assert recorded["args"][recorded["args"].index("-i") + 1] == "245"
    payload = json.loads(capsys.readouterr().out.split("BENCH_JSON ", 1)[1])
    assert payload["max_iterations"] == 245 and payload["training_parameters"][-1] == "245"
    broken = tmp_path / "broken-wapiti"
    broken.write_text("#!/bin/sh\nexit 9\n", encoding="utf-8")
    broken.chmod(0o755)
    unbroken = [str(broken) if a == str(fake_wapiti(tmp_path)) else a for a in argv]
    wapiti_runner.main(unbroken)  # same cap: reused, the broken binary never runs
    assert json.loads(capsys.readouterr().out.split("BENCH_JSON ", 1)[1])["reused"]
    with pytest.raises(SystemExit, match="exit 9"):  # GROBID's 2000 is another run: trained again
        wapiti_runner.main(unbroken[:-2])
    assert wapiti_peer.train_args(tmp_path, "w", "date", 2, files, tmp_path / "p.json", 7200.0, 245)[-4:] == [
        "--time-limit", "7200.0", "--iterations", "245"]


@pytest.mark.parametrize("bad", ["0", "-3", "many"])
def test_an_iteration_cap_below_one_or_not_a_number_is_refused_naming_the_option(bad, capsys):
    with pytest.raises(SystemExit):
        wapiti_runner.main(["train", "--wapiti", "w", "--template", "t", "--task", "header", "--seed", "2",
                            "--train", "a", "--valid", "b", "--test", "c", "--model", "m", "--iterations", bad])
    error = capsys.readouterr().err
    assert "--iterations" in error and (repr(bad) in error or f"got {bad}" in error)
