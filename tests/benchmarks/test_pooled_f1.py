"""benchmarks/peers/pooled_f1.py: runs pooled by task and system, pairs compared on their common seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.peers import pooled_f1


def _run(system: str, seed: int, counts: list[list[int]], digest: str = "g", task: str = "date") -> dict:
    return {"system": system, "architecture": "BidLSTM_CRF", "task": task, "seed": seed, "test_counts": counts,
            "gold_digest": f"{digest}{seed}"}


def _file(path: Path, runs: list[dict]) -> Path:
    path.write_text(json.dumps({"train_runs": runs}), encoding="utf-8")
    return path


def test_pooled_f1_and_paired_differences_over_common_seeds(tmp_path: Path) -> None:
    perfect = [[1, 0, 0]] * 4
    half = [[1, 0, 0], [1, 0, 0], [0, 1, 1], [0, 1, 1]]
    a = _file(tmp_path / "a.json", [_run("textorch", 1, perfect), _run("textorch", 2, perfect)])
    b = _file(tmp_path / "b.json", [_run("wapiti", 1, half), _run("wapiti", 3, half)])
    out = pooled_f1.compare(pooled_f1.grouped_runs([a, b]))["date"]
    assert out["pooled"]["textorch BidLSTM_CRF"] == {"f1": 100.0, "seeds": [1, 2]}
    assert out["pooled"]["wapiti"]["f1"] == pytest.approx(50.0)
    (difference,) = out["differences"]
    assert (difference["a"], difference["b"], difference["seeds"]) == ("textorch BidLSTM_CRF", "wapiti", [1])
    assert difference["f1_diff"] == pytest.approx(50.0)
    assert difference["f1_diff_ci95"][0] <= 50.0 <= difference["f1_diff_ci95"][1]


def test_runs_scored_on_other_sequences_or_differing_copies_are_refused(tmp_path: Path) -> None:
    a = _file(tmp_path / "a.json", [_run("textorch", 1, [[1, 0, 0]])])
    b = _file(tmp_path / "b.json", [_run("wapiti", 1, [[1, 0, 0]], digest="other")])
    with pytest.raises(SystemExit, match="different test sequences"):
        pooled_f1.compare(pooled_f1.grouped_runs([a, b]))
    c = _file(tmp_path / "c.json", [_run("textorch", 1, [[0, 1, 1]])])
    with pytest.raises(SystemExit, match="differs from an earlier file's"):
        pooled_f1.grouped_runs([a, c])


def test_a_tagged_file_makes_its_runs_a_group_of_their_own(tmp_path: Path) -> None:
    old = _file(tmp_path / "old.json", [_run("textorch", 1, [[0, 1, 1]]), _run("wapiti", 1, [[1, 0, 0]])])
    new = _file(tmp_path / "new.json", [_run("textorch", 1, [[1, 0, 0]]), _run("wapiti", 1, [[1, 0, 0]])])
    with pytest.raises(SystemExit, match="differs from an earlier file's"):
        pooled_f1.grouped_runs([old, new])  # the same job's runs of two versions cannot be pooled
    out = pooled_f1.compare(pooled_f1.grouped_runs([old, new], {new: "iob2"}))["date"]
    assert out["pooled"]["textorch BidLSTM_CRF"]["f1"] == 0.0
    assert out["pooled"]["textorch BidLSTM_CRF (iob2)"]["f1"] == 100.0
    assert out["pooled"]["wapiti"]["f1"] == 100.0  # Wapiti's runs stay one group, whichever file holds them
    pairs = {(d["a"], d["b"]) for d in out["differences"]}
    assert ("textorch BidLSTM_CRF", "textorch BidLSTM_CRF (iob2)") in pairs


@pytest.mark.parametrize("tag", ["other.json=iob2", "a.json", "a.json="])
def test_a_tag_names_one_of_the_results_files_and_a_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture, tag: str) -> None:
    a = _file(tmp_path / "a.json", [_run("textorch", 1, [[1, 0, 0]])])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["pooled_f1", str(a.name), "--tag", tag])
    with pytest.raises(SystemExit) as exit_info:
        pooled_f1.main()
    assert exit_info.value.code == 2
    assert f"--tag {tag!r}: give FILE=TEXT with FILE one of the results files" in capsys.readouterr().err
