"""benchmarks/diagnostics/onnx_stages.py refuses options that do not go together, before it reads anything."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime")

from benchmarks.diagnostics import onnx_stages  # noqa: E402


@pytest.mark.parametrize("extra,message", [
    (["--input", "a.txt", "b.txt"], "give one --input per --model"),
    (["--input", "a.txt", "--repeats", "0"], "--repeats must be at least 1"),
    (["--input", "a.txt", "--wapiti-model", "m.wapiti"], "--wapiti-model and --wapiti-input need --wapiti"),
    (["--input", "a.txt", "--wapiti", "wapiti", "--wapiti-model", "m.wapiti"],
     "--wapiti needs one --wapiti-model and one --wapiti-input per --model"),
])
def test_options_that_do_not_go_together_are_refused(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
                                                     extra: list[str], message: str) -> None:
    monkeypatch.setattr("sys.argv", ["onnx_stages", "--model", "no-such-model", *extra])
    with pytest.raises(SystemExit) as exit_info:
        onnx_stages.main()
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
