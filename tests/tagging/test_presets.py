"""``textorch grobid`` and ``textorch ner``: DeLFT's per-model settings, input resolution, and
the commands end to end on (a small part of) the shared GROBID and CoNLL-2003 data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import require_shared
from textorch.tagging import presets as apps
from textorch.cli.main import main
from textorch.errors import ConfigError, DataError
from textorch.tagging.labeler import SequenceLabeler
from textorch.train.history import read_history

TRAINED_FILES = ["config.json", "history.csv", "history.json", "learning-curves.png", "model.safetensors", "vocab.json"]



def test_grobid_defaults_are_delfts() -> None:
    date = apps.grobid_defaults("date", "BidLSTM_CRF_FEATURES")
    # feature columns: chosen from the data with DeLFT's features vocabulary size
    assert (date.batch_size, date.max_sequence_length, date.max_epoch, date.feature_columns) == (60, 50, 60, None)
    assert date.feature_vocabulary_size == 12
    header = apps.grobid_defaults("header", "BidLSTM_CRF")
    assert (header.batch_size, header.max_sequence_length, header.max_epoch) == (9, 3500, 80)
    bert = apps.grobid_defaults("date", "BERT_CRF")
    assert (bert.batch_size, bert.max_sequence_length, bert.max_epoch) == (80, 30, 60)
    other = apps.grobid_defaults("quotation", "BidLSTM_CRF")
    assert (other.batch_size, other.max_sequence_length) == (20, 3000)
    with pytest.raises(ConfigError, match="invalid GROBID model name"):
        apps.grobid_defaults("../date", "BidLSTM_CRF")
    assert apps.grobid_model_name("date", "BidLSTM_CRF") == "grobid-date-BidLSTM_CRF"


# DeLFT 1.2.0's grobidTagger.configure(): (batch size, maximum sequence length, epochs, early stopping).
DELFT_1_2_0_RNN = {
    "citation": (30, 500, 60), "header": (9, 3500, 80), "date": (60, 50, 60), "affiliation-address": (20, 600, 60),
    "software": (20, 1500, 60), "software-mention": (20, 1500, 60), "reference-segmenter": (5, 3000, 60),
    "funding-acknowledgement": (30, 800, 60), "patent-citation": (40, 1000, 60), "figure": (3, 1000, 60),
    "table": (3, 3000, 60), "name-header": (20, 3000, 60), "name-citation": (20, 3000, 60),
    "segmentation": (20, 3000, 60),
}
DELFT_1_2_0_BERT = {
    "citation": (20, 200, 60, True), "header": (6, 512, 60, True), "date": (80, 30, 60, True),
    "affiliation-address": (20, 200, 60, True), "software": (8, 512, 30, False), "software-x": (8, 512, 30, False),
    "funding-acknowledgement": (8, 512, 60, True), "patent-citation": (8, 512, 60, True), "figure": (20, 200, 60, True),
}


@pytest.mark.parametrize("model", DELFT_1_2_0_RNN)
def test_recurrent_settings_are_delft_1_2_0s(model: str) -> None:
    for architecture in ("BidLSTM_CRF", "BidLSTM_CRF_FEATURES", "BidGRU_CRF"):
        chosen = apps.grobid_defaults(model, architecture)
        assert (chosen.batch_size, chosen.max_sequence_length, chosen.max_epoch) == DELFT_1_2_0_RNN[model]
        assert (chosen.min_validation_sequences, chosen.min_steps_per_epoch) == (0, 0)  # DeLFT has no such rules


@pytest.mark.parametrize("model", DELFT_1_2_0_BERT)
def test_transformer_settings_are_delft_1_2_0s(model: str) -> None:
    chosen = apps.grobid_defaults(model, "BERT_CRF")
    assert (chosen.batch_size, chosen.max_sequence_length, chosen.max_epoch, chosen.early_stop) == DELFT_1_2_0_BERT[model]


def test_textorchs_default_is_one_for_every_model_name() -> None:
    assert apps.GROBID_DEFAULT_ARCHITECTURE == "BidLSTM_CRF_FEATURES_TEMPLATE"
    # GROBID's DeLFTModel passes the layout features to tag() only for names containing "FEATURE"
    assert "FEATURE" in apps.GROBID_DEFAULT_ARCHITECTURE
    chosen = {model: apps.grobid_defaults(model, apps.GROBID_DEFAULT_ARCHITECTURE)
              for model in ("figure", "date", "header", "fulltext", "a-model-textorch-has-no-preset-for")}
    assert len(set(chosen.values())) == 1  # the data decides, never the name
    default = chosen["figure"]
    assert (default.batch_size, default.max_sequence_length, default.max_epoch) == (20, 1000, 60)
    assert (default.min_validation_sequences, default.min_steps_per_epoch, default.steps_without_validation) == \
        (apps.MIN_VALIDATION_SEQUENCES, apps.MIN_STEPS_PER_EPOCH, apps.STEPS_WITHOUT_VALIDATION)
    assert (default.tokens_without_validation, default.max_batch_tokens, default.min_validation_tokens,
            default.tokens_with_validation, default.template_only_from_tokens) == \
        (apps.TOKENS_WITHOUT_VALIDATION, apps.MAX_BATCH_TOKENS, apps.MIN_VALIDATION_TOKENS, apps.TOKENS_WITH_VALIDATION,
         apps.TEMPLATE_ONLY_FROM_TOKENS)


def test_command_line_values_win_over_application_defaults() -> None:
    defaults = apps.grobid_defaults("date", "BidLSTM_CRF_FEATURES")
    chosen = apps.resolve_options(defaults, {"batch_size": 7, "max_epoch": None, "feature_columns": "9-10"})
    assert chosen == {"batch_size": 7, "max_sequence_length": 50, "max_epoch": 60, "early_stop": True,
                      "feature_columns": "9-10", "feature_vocabulary_size": 12, "bucket_batches": 1, "lr_decay": 0.5,
                      "min_validation_sequences": 0, "min_validation_tokens": 0, "tokens_with_validation": 0, "min_steps_per_epoch": 0,
                      "steps_without_validation": 0, "tokens_without_validation": 0, "max_batch_tokens": 0,
                      "template_only_from_tokens": 0}
    given = apps.resolve_options(defaults, {"bucket_batches": 10, "lr_decay": 1.0})
    assert (given["bucket_batches"], given["lr_decay"]) == (10, 1.0)
    cnn = apps.ner_defaults("BidLSTM_CNN_CRF")
    assert (cnn.max_epoch, cnn.word_hidden) == (30, 200)
    assert apps.ner_defaults("BERT_CRF").early_stop is False


def test_applications_train_as_delft_does() -> None:
    """DeLFT's rate cut on a plateau for the recurrent taggers; random batches on GROBID's
    corpora, the library's length buckets on CoNLL-2003 (docs/performance.md)."""
    from textorch.train.config import TrainConfig

    ner = apps.resolve_options(apps.ner_defaults("BidLSTM_CRF"), {})
    assert (ner["lr_decay"], ner["bucket_batches"]) == (0.5, TrainConfig.bucket_batches)
    for model in ("date", "name-header", "citation"):
        grobid = apps.resolve_options(apps.grobid_defaults(model, "BidLSTM_CRF"), {})
        assert (grobid["lr_decay"], grobid["bucket_batches"]) == (0.5, 1)
    bert = apps.resolve_options(apps.grobid_defaults("date", "BERT_CRF"), {})
    assert (bert["lr_decay"], bert["bucket_batches"]) == (TrainConfig.lr_decay, 1)


def test_a_folder_input_takes_the_newest_dated_training_file(tmp_path: Path) -> None:
    for name in ["date-180506.train", "date-220311.train", "date-191231.train", "name-header-251225.train", "date-notes.txt"]:
        (tmp_path / name).write_text("x\n")
    assert apps.resolve_grobid_input(str(tmp_path), "date") == str(tmp_path / "date-220311.train")
    assert apps.resolve_grobid_input(str(tmp_path / "date-180506.train"), "date") == str(tmp_path / "date-180506.train")
    with pytest.raises(DataError, match="no citation-YYMMDD.train"):
        apps.resolve_grobid_input(str(tmp_path), "citation")


@pytest.mark.real_data
def test_grobid_date_train_eval_eval_and_tag_on_shared_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture) -> None:
    folder = require_shared("grobid/date")
    monkeypatch.chdir(tmp_path)  # the default output is models/grobid-MODEL-ARCH under the working directory
    metrics = tmp_path / "metrics.json"
    code = main(["grobid", "date", "train-eval", "--input", str(folder), "--architecture", "BidLSTM_CRF_FEATURES",
                 "--max-epoch", "1", "--max-sequences", "80", "--metrics-json", str(metrics)])
    assert code == 0
    model = tmp_path / "models" / "grobid-date-BidLSTM_CRF_FEATURES"
    assert sorted(p.name for p in model.iterdir()) == TRAINED_FILES
    config = json.loads((model / "config.json").read_text())
    assert config["data"]["feature_columns"] is None and config["data"]["n_features"] == 16  # chosen from the data
    assert SequenceLabeler.load(model).encoder.feature_columns == list(range(9, 16))
    assert json.loads(metrics.read_text())["n_sequences"] == 8  # 10% of the first 80 held out for testing
    assert len(read_history(model).runs[0].epochs) == 1
    assert "micro avg" in capsys.readouterr().out

    assert main(["grobid", "date", "eval", "--input", str(folder), "--architecture", "BidLSTM_CRF_FEATURES",
                 "--max-sequences", "30", "--metrics-json", str(tmp_path / "eval.json")]) == 0
    assert json.loads((tmp_path / "eval.json").read_text())["n_sequences"] == 30

    lines = (folder / "date-220311.train").read_text().splitlines()[:12]
    to_tag = tmp_path / "in.grobid"
    to_tag.write_text("\n".join(" ".join(line.split()[:-1]) if line.strip() else "" for line in lines) + "\n")
    capsys.readouterr()
    assert main(["grobid", "date", "tag", "--input", str(to_tag), "--architecture", "BidLSTM_CRF_FEATURES"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["model"] == "grobid-date-BidLSTM_CRF_FEATURES"
    n_sequences = sum(1 for a, b in zip([""] + lines, lines) if b.strip() and not a.strip())
    assert len(document["texts"]) == n_sequences
    first = document["texts"][0]
    assert len(first["labels"]) == len(first["text"].split())
    assert all(label.endswith(">") for label in first["labels"])  # GROBID labels back


def test_grobid_default_on_small_data_of_an_unknown_model_trains_on_every_sequence(
        tmp_path: Path, tiny_grobid: Path, capsys: pytest.CaptureFixture) -> None:
    """No --architecture: textorch's default, whose rules follow the data. 40 sequences leave 4
    for validation, too few: they join the training data, and batches of 20 become batches of 1."""
    output = tmp_path / "model"
    assert main(["grobid", "caption-like", "train-eval", "--input", str(tiny_grobid), "--max-epoch", "2",
                 "--output", str(output)]) == 0
    log = capsys.readouterr().err
    assert (f"validation data of 4 sequences is too few to pick an epoch (fewer than {apps.MIN_VALIDATION_SEQUENCES}, "
            f"and fewer than {apps.MIN_VALIDATION_TOKENS:,} tokens): training on all 36") in log
    assert "batch size 1 for 36 training sequences of 4 tokens on average (at least 20 steps an epoch" in log
    assert "2 epochs of 36 steps for 36 training sequences without validation" in log  # --max-epoch caps the budget
    config = json.loads((output / "config.json").read_text())
    assert config["model"]["architecture"] == apps.GROBID_DEFAULT_ARCHITECTURE
    epochs = read_history(output).runs[0].epochs
    assert len(epochs) == 2 and all(e["valid_score"] is None for e in epochs)


def test_grobid_needs_an_input(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["grobid", "date", "train", "--output", str(tmp_path / "m")]) == 2
    assert "needs --input" in capsys.readouterr().err


def _tiny_conll_copy(source: Path, target: Path, n: int = 200) -> Path:
    """The first ``n`` sentences of each CoNLL-2003 file (IOB1 as it is), written to ``target``."""
    target.mkdir()
    for name in ("eng.train", "eng.testa", "eng.testb"):
        kept, sentences = [], 0
        for line in (source / name).read_text().splitlines():
            kept.append(line)
            if not line.strip() and kept[-2:-1] and kept[-2].strip() and not kept[-2].startswith("-DOCSTART-"):
                sentences += 1
                if sentences == n:
                    break
        (target / name).write_text("\n".join(kept) + "\n")
    return target


@pytest.mark.real_data
def test_ner_conll2003_train_eval_then_eval(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = _tiny_conll_copy(require_shared("conll2003"), tmp_path / "conll", n=120)
    model = tmp_path / "ner"
    metrics = tmp_path / "metrics.json"
    code = main(["ner", "train-eval", "--dataset", "conll2003", "--data-dir", str(data), "--output", str(model),
                 "--max-epoch", "1", "--metrics-json", str(metrics)])
    assert code == 0
    scores = json.loads(metrics.read_text())
    assert scores["n_sequences"] == 120  # eng.testb (the copy) is the test set, whole
    assert set(scores["per_label"]) <= {"PER", "ORG", "LOC", "MISC"}
    labeler = SequenceLabeler.load(model)
    assert set(labeler.encoder.labels.items) <= {"O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"}
    history = read_history(model)
    assert history.final_scores_on.endswith("eng.testb")
    capsys.readouterr()
    assert main(["ner", "eval", "--data-dir", str(data), "--output", str(model), "--metrics-json", str(tmp_path / "e.json")]) == 0
    again = json.loads((tmp_path / "e.json").read_text())
    assert again["f1"] == pytest.approx(scores["f1"]) and again["n_sequences"] == 120
    assert main(["ner", "eval", "--data-dir", str(data), "--output", str(model), "--chunk-sequences", "7",
                 "--metrics-json", str(tmp_path / "e7.json")]) == 0  # read in chunks: the same counts
    assert json.loads((tmp_path / "e7.json").read_text()) == again


@pytest.mark.real_data
def test_ner_train_uses_all_three_files_with_a_90_10_split(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = _tiny_conll_copy(require_shared("conll2003"), tmp_path / "conll", n=40)
    assert main(["ner", "train", "--data-dir", str(data), "--output", str(tmp_path / "m"), "--max-epoch", "1"]) == 0
    assert "108 train, 12 valid, 0 test sequences" in capsys.readouterr().err  # 3 x 40 sentences, 10% for validation
    assert main(["ner", "train", "--data-dir", str(data), "--train-with-validation-set"]) == 2


def _generated_corpus(n: int, length: int = 6) -> "Corpus":
    from textorch.data.corpus import Corpus, TokenSequence

    tokens = [f"w{k}" for k in range(length)]
    return Corpus([TokenSequence(tokens, ["B-X"] + ["I-X"] * (length - 1), features=[["a", "b"]] * length)
                   for _ in range(n)], "grobid", path="generated")


@pytest.mark.parametrize("n, trains_on_all, batch, epochs", [
    (75, True, 3, 60),          # figure's size: every sequence, small batches, every epoch
    (1450, True, 20, 30),       # name-header's: every sequence, epochs from the step budget
    (6000, False, 20, 60),      # a validation share of 600 picks the epoch, early stopping on
])
def test_the_grobid_default_chooses_its_training_from_the_data(n: int, trains_on_all: bool, batch: int,
                                                               epochs: int) -> None:
    """A model name textorch has no preset for: the corpus's size alone decides."""
    from textorch.tagging.config import TrainConfig
    from textorch.tagging.training_data import fitted_to_data, split_for_training

    chosen = apps.resolve_options(apps.grobid_defaults("a-model-textorch-has-no-preset-for",
                                                       apps.GROBID_DEFAULT_ARCHITECTURE), {})
    config = TrainConfig(batch_size=chosen["batch_size"], max_epoch=chosen["max_epoch"], seed=1,
                         min_validation_sequences=chosen["min_validation_sequences"],
                         min_steps_per_epoch=chosen["min_steps_per_epoch"],
                         steps_without_validation=chosen["steps_without_validation"])
    train, valid, _ = split_for_training(_generated_corpus(n), None, None, True, config)
    fitted = fitted_to_data(config, [len(x) for x in train.sequences], valid is not None)
    assert (valid is None) == trains_on_all and fitted.early_stop == (not trains_on_all)
    assert (fitted.batch_size, fitted.max_epoch) == (batch, epochs)
    assert fitted.lr_schedule == ("linear" if trains_on_all else "constant")  # early stopping: DeLFT's plateau cuts


def test_grobid_eval_streams_and_scores_as_the_whole_file(tmp_path: Path, tiny_grobid: Path) -> None:
    """``grobid MODEL eval`` reads in chunks (small ones here) and keeps only counts: the scores
    are those of the labeler on the whole file, and --max-sequences still takes the first N."""
    from textorch.data.readers import read_grobid

    model = tmp_path / "model"
    assert main(["grobid", "caption-like", "train", "--input", str(tiny_grobid), "--architecture", "BidLSTM_CRF_FEATURES",
                 "--max-epoch", "1", "--output", str(model)]) == 0
    whole = read_grobid(tiny_grobid)
    expected = SequenceLabeler.load(model).evaluate(whole)
    for extra, sequences in (([], whole.sequences), (["--max-sequences", "5"], whole.sequences[:5])):
        metrics = tmp_path / "eval.json"
        assert main(["grobid", "caption-like", "eval", "--input", str(tiny_grobid), "--output", str(model),
                     "--chunk-sequences", "3", "--metrics-json", str(metrics), *extra]) == 0
        scores = json.loads(metrics.read_text())
        if not extra:
            assert scores == json.loads(json.dumps(expected))
        else:
            assert scores["n_sequences"] == 5
            assert scores == json.loads(json.dumps(SequenceLabeler.load(model).evaluate(
                whole.__class__(sequences, whole.format, path=whole.path))))


def test_grobid_eval_names_the_line_of_a_malformed_sequence(tmp_path: Path, tiny_grobid: Path,
                                                           capsys: pytest.CaptureFixture) -> None:
    """Read in chunks, a bad line far into the file still stops the evaluation with its file:line."""
    model = tmp_path / "model"
    assert main(["grobid", "caption-like", "train", "--input", str(tiny_grobid), "--architecture", "BidLSTM_CRF_FEATURES",
                 "--max-epoch", "1", "--output", str(model)]) == 0
    lines = tiny_grobid.read_text().splitlines()
    bad_at = max(i for i, line in enumerate(lines) if line.strip())  # the last token line
    lines[bad_at] = lines[bad_at].split()[0] + " " + lines[bad_at].split()[-1]  # its feature columns gone
    broken = tmp_path / "broken.train"
    broken.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["grobid", "caption-like", "eval", "--input", str(broken), "--output", str(model),
                 "--chunk-sequences", "3"]) == 2
    assert f"{broken}:{bad_at + 1}:" in capsys.readouterr().err


def _layout_file(path: Path, n: int = 3, length: int = 1100) -> Path:
    """Figure's kind in small: few sequences longer than a training piece, a dozen layout columns,
    a short head, a description and a long content field."""
    rows = []
    for i in range(n):
        for j in range(length):
            label = "<figure_head>" if j < 3 else "<figDesc>" if j < 40 + 7 * i else "<content>"
            start = j == 0 or (j == 3) or (j == 40 + 7 * i)
            word = f"w{(i * 31 + j * 7) % 53}"
            layout = ["BLOCKSTART" if start else "BLOCKIN", "LINESTART" if j % 9 == 0 else "LINEIN",
                      "NEWFONT" if start else "SAMEFONT", str(j % 4), "ALLCAP" if j % 11 == 0 else "NOCAPS",
                      "NODIGIT", str(j % 3), "NOPUNCT", str(min(j // 100, 9)), str(i % 2), "0", "1"]
            rows.append(" ".join([word, word.lower(), *layout, ("I-" if start else "") + label]))
        rows.append("")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("kind", ["date", "layout"])
def test_one_file_trained_under_two_names_gives_the_same_model(tmp_path: Path, tiny_grobid: Path, kind: str,
                                                              capsys: pytest.CaptureFixture) -> None:
    """textorch's GROBID default decides from the data alone: ``figure`` (a name DeLFT has settings
    for) and a name nobody knows train the same network with the same settings, on small data of
    date's kind and on long layout sequences of figure's kind (cut into training pieces)."""
    data = tiny_grobid if kind == "date" else _layout_file(tmp_path / "layout.train")
    models, settings = {}, {}
    for name in ("figure", "a-layout-model-of-figures-kind"):
        models[name] = tmp_path / name
        assert main(["grobid", name, "train", "--input", str(data), "--max-epoch", "2", "--seed", "3",
                     "--output", str(models[name]), "--quiet"]) == 0
        settings[name] = [line.split(" INFO ", 1)[1] for line in capsys.readouterr().err.splitlines()
                          if " INFO settings: " in line]
    assert settings["figure"] == settings["a-layout-model-of-figures-kind"] and len(settings["figure"]) == 1
    assert f"max sequence length {apps.TRAINING_PIECE_LENGTH}," in settings["figure"][0]
    configs = [json.loads((m / "config.json").read_text()) for m in models.values()]
    assert configs[0] == configs[1]  # the network, the data settings and the weights' digest
    weights = [(m / "model.safetensors").read_bytes() for m in models.values()]
    assert weights[0] == weights[1]
