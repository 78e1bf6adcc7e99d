"""benchmarks/diagnostics/stages.py refuses options that do not go together, before it reads
anything, and names its results file after the set-up it measured."""

from __future__ import annotations

import pytest

from benchmarks.diagnostics import stages


@pytest.mark.parametrize("extra,message", [
    (["--input", "a.txt", "b.txt"], "give one --input per --model"),
    (["--input", "a.txt", "--repeats", "0"], "--repeats must be at least 1"),
    (["--input", "a.txt", "--quantized"], "--quantized needs --engine onnx"),
    (["--input", "a.txt", "--wapiti-model", "m.wapiti"], "--wapiti-model and --wapiti-input need --wapiti"),
    (["--input", "a.txt", "--wapiti", "wapiti", "--wapiti-model", "m.wapiti"],
     "--wapiti needs one --wapiti-model and one --wapiti-input per --model"),
])
def test_options_that_do_not_go_together_are_refused(capsys: pytest.CaptureFixture, extra: list[str],
                                                     message: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        stages.main(["--model", "no-such-model", *extra])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("extra,name", [
    ([], "stages-torch"),
    (["--engine", "onnx", "--quantized"], "stages-onnx-int8"),
    (["--engine", "onnx", "--route", "sequences", "--pause-collector"], "stages-onnx-collector-paused-sequence-route"),
    (["--route", "sequences"], "stages-torch"),  # the PyTorch engine has no row route to leave
    (["--engine", "onnx", "--route", "sequences", "--input-format", "conll"], "stages-onnx"),
])
def test_the_default_results_name_says_the_set_up(extra: list[str], name: str) -> None:
    assert stages.default_name(stages.parse_args(["--model", "m", "--input", "f", *extra])) == name
