"""Static embeddings: all file formats, the LMDB cache life cycle, the registry, real vectors."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from textorch.embeddings import (
    StaticEmbeddings,
    fingerprint_file,
    open_embeddings,
    resolve_spec,
    sniff_format,
)
from textorch.embeddings import cache as cache_mod
from textorch.embeddings import static as static_mod
from textorch.errors import ConfigError, DataError

WORDS = ["the", "Paris", "paris", "Müller", "東京", "naïve", "apple", "Apple"]
DIM = 4


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep every test's cache and registry lookups inside tmp_path, whatever the user has set."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TEXTORCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TEXTORCH_EMBEDDINGS_REGISTRY", raising=False)


def _vectors(words: list[str], dim: int = DIM, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {w: rng.standard_normal(dim).astype(np.float32) for w in words}


def _text_lines(vectors: dict[str, np.ndarray]) -> list[str]:
    # repr of the float64 value of a float32 parses back to exactly that float32.
    return [w + " " + " ".join(repr(float(x)) for x in v) for w, v in vectors.items()]


def write_glove(path: Path, vectors: dict[str, np.ndarray]) -> Path:
    path.write_text("\n".join(_text_lines(vectors)) + "\n", encoding="utf-8")
    return path


def write_w2v_text(path: Path, vectors: dict[str, np.ndarray]) -> Path:
    dim = len(next(iter(vectors.values())))
    lines = [f"{len(vectors)} {dim}"] + [line + " " for line in _text_lines(vectors)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")  # fastText-style trailing space
    return path


def write_w2v_binary(path: Path, vectors: dict[str, np.ndarray], newline: bool = True) -> Path:
    dim = len(next(iter(vectors.values())))
    body = f"{len(vectors)} {dim}\n".encode()
    for word, vector in vectors.items():
        body += word.encode() + b" " + vector.astype("<f4").tobytes() + (b"\n" if newline else b"")
    path.write_bytes(body)
    return path


def gzipped(path: Path) -> Path:
    target = path.with_name(path.name + ".gz")
    target.write_bytes(gzip.compress(path.read_bytes()))
    path.unlink()
    return target


def _check_all(emb: StaticEmbeddings, vectors: dict[str, np.ndarray]) -> None:
    words = list(vectors)
    got, found = emb.lookup(words)
    assert got.dtype == np.float32 and got.shape == (len(words), emb.dim)
    assert found.all()
    np.testing.assert_array_equal(got, np.stack([vectors[w] for w in words]))


FORMATS: dict[str, Callable[[Path, dict[str, np.ndarray]], Path]] = {
    "glove.txt": write_glove,
    "glove.txt.gz": lambda p, v: gzipped(write_glove(p.with_suffix(""), v)),
    "w2v.txt": write_w2v_text,
    "crawl.vec": write_w2v_text,
    "crawl.vec.gz": lambda p, v: gzipped(write_w2v_text(p.with_suffix(""), v)),
    "w2v.bin": write_w2v_binary,
    "w2v-nonl.bin": lambda p, v: write_w2v_binary(p, v, newline=False),
    "w2v.bin.gz": lambda p, v: gzipped(write_w2v_binary(p.with_suffix(""), v)),
}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_format_round_trips(tmp_path: Path, name: str) -> None:
    vectors = _vectors(WORDS)
    path = FORMATS[name](tmp_path / name, vectors)
    with open_embeddings(str(path)) as emb:
        assert (emb.dim, emb.size, emb.path, emb.name) == (DIM, len(WORDS), path, path.name)
        assert len(emb.fingerprint) == 64
        _check_all(emb, vectors)
    fmt = sniff_format(path)
    assert fmt.binary == name.endswith((".bin", ".bin.gz"))
    assert fmt.gzipped == name.endswith(".gz")
    assert fmt.header == (not name.startswith("glove"))


def test_lower_case_fallback_exact_first_and_oov_zeros(tmp_path: Path) -> None:
    vectors = _vectors(["paris", "Apple", "apple"])
    emb = open_embeddings(str(write_glove(tmp_path / "v.txt", vectors)))
    assert emb is not None
    got, found = emb.lookup(["PARIS", "Paris", "Apple", "APPLE", "zzz", "", "paris"])
    assert found.tolist() == [True, True, True, True, False, False, True]
    np.testing.assert_array_equal(got[0], vectors["paris"])
    np.testing.assert_array_equal(got[1], vectors["paris"])
    np.testing.assert_array_equal(got[2], vectors["Apple"])  # exact match beats lower case
    np.testing.assert_array_equal(got[3], vectors["apple"])
    assert not got[4].any() and not got[5].any()
    empty, none_found = emb.lookup([])
    assert empty.shape == (0, DIM) and none_found.shape == (0,)
    emb.close()


def test_glove_840b_oddities(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Words with spaces, non-breaking spaces, duplicates and over-long words."""
    lines = [
        ", 1 2 3",
        ". . . 4 5 6",
        "a\u00a0b 7 8 9",
        ", 10 11 12",
        "x" * 600 + " 1 1 1",
        "",
    ]
    path = tmp_path / "odd.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with open_embeddings(str(path)) as emb:
        assert emb.size == 3
        got, found = emb.lookup([",", ". . .", "a\u00a0b", "a"])
    assert found.tolist() == [True, True, True, False]
    assert got[:3].tolist() == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]  # first of the duplicates
    assert "repeated" in caplog.text and "over-long" in caplog.text


@pytest.mark.parametrize(
    ("content", "line", "fragment"),
    [
        ("a 1 2 3\nb 1 2\nc 1 2 3\n", 2, "found 3 fields"),
        ("a 1 2 3\nb 1 x2 3\n", 2, "b'x2'"),
        ("2 3\na 1 2 3\nb 1 2 nan?\n", 3, "nan?"),
    ],
)
def test_malformed_line_names_file_and_line(
    tmp_path: Path, content: str, line: int, fragment: str
) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError) as info:
        open_embeddings(str(path))
    assert str(info.value).startswith(f"{path}:{line}: ")
    assert fragment in str(info.value)
    # The failed build left nothing behind: no cache, no temporary folder.
    assert list((tmp_path / "cache" / "embeddings").iterdir()) == []


def test_truncated_binary_is_a_data_error(tmp_path: Path) -> None:
    path = write_w2v_binary(tmp_path / "v.bin", _vectors(["a", "b", "c"]))
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(DataError, match=r"v\.bin:4: truncated vector for b'c'"):
        open_embeddings(str(path))
    path.write_bytes(path.read_bytes()[:23])  # header, then "a" and its vector
    with pytest.raises(DataError, match=r"v\.bin:3: no word found for vector 2 of the 3"):
        open_embeddings(str(path))
    fasttext_model = tmp_path / "cc.en.300.bin"
    fasttext_model.write_bytes(b"\xba\x16\x4f\x2f\x0c\x00\x00\x00" * 4)
    with pytest.raises(DataError, match=r"cc\.en\.300\.bin:1: .*use the matching \.vec"):
        open_embeddings(str(fasttext_model))


def test_cache_is_built_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vectors = _vectors(WORDS)
    path = write_glove(tmp_path / "v.txt", vectors)
    open_embeddings(str(path)).close()
    entries = list((tmp_path / "cache" / "embeddings").iterdir())
    assert [e.name for e in entries] == [f"{fingerprint_file(path)}.v{cache_mod.CACHE_VERSION}"]

    def must_not_parse(self: object) -> None:
        raise AssertionError("the file was parsed again")

    monkeypatch.setattr(static_mod.VectorFileReader, "__iter__", must_not_parse)
    mtime = entries[0].stat().st_mtime_ns
    with open_embeddings(str(path)) as emb:
        _check_all(emb, vectors)
    assert entries[0].stat().st_mtime_ns == mtime


def test_changed_file_gets_new_fingerprint_and_cache(tmp_path: Path) -> None:
    path = write_glove(tmp_path / "v.txt", _vectors(WORDS, seed=1))
    with open_embeddings(str(path)) as emb:
        first = emb.fingerprint
    new = _vectors(WORDS, seed=2)
    write_glove(path, new)
    with open_embeddings(str(path)) as emb:
        assert emb.fingerprint != first
        _check_all(emb, new)
    assert len(list((tmp_path / "cache" / "embeddings").iterdir())) == 2


def test_fingerprint_reads_both_ends_and_ignores_location(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    data = bytearray(os.urandom(3 << 20))
    big.write_bytes(data)
    copy = tmp_path / "sub"
    copy.mkdir()
    (copy / "other.txt").write_bytes(data)
    assert fingerprint_file(big) == fingerprint_file(copy / "other.txt")
    data[-1] ^= 1
    big.write_bytes(data)
    assert fingerprint_file(big) != fingerprint_file(copy / "other.txt")
    data[-1] ^= 1
    data[len(data) // 2] ^= 1  # a same-size change in the middle: documented blind spot
    big.write_bytes(data)
    assert fingerprint_file(big) == fingerprint_file(copy / "other.txt")


def test_cache_never_beside_read_only_source(tmp_path: Path) -> None:
    source_dir = tmp_path / "vectors"
    source_dir.mkdir()
    path = write_glove(source_dir / "v.txt", _vectors(WORDS))
    source_dir.chmod(0o555)
    try:
        with open_embeddings(str(path)) as emb:
            assert emb.lookup(["the"])[1].all()
        assert sorted(p.name for p in source_dir.iterdir()) == ["v.txt"]
        assert len(list((tmp_path / "cache" / "embeddings").iterdir())) == 1
    finally:
        source_dir.chmod(0o755)


def test_cache_dir_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One cache root (argument, else $TEXTORCH_CACHE_DIR, else ~/.cache/textorch), vectors under embeddings/."""
    path = write_glove(tmp_path / "v.txt", _vectors(WORDS))
    open_embeddings(str(path), cache_dir=tmp_path / "explicit").close()
    assert [p.name for p in (tmp_path / "explicit").iterdir()] == ["embeddings"]
    assert len(list((tmp_path / "explicit" / "embeddings").iterdir())) == 1
    monkeypatch.delenv("TEXTORCH_CACHE_DIR")
    assert cache_mod.resolve_cache_dir() == tmp_path / "home/.cache/textorch"
    open_embeddings(str(path)).close()
    assert len(list((tmp_path / "home/.cache/textorch/embeddings").iterdir())) == 1
    assert not (tmp_path / "cache").exists()


def test_a_cache_where_earlier_releases_built_it_is_reused(tmp_path: Path) -> None:
    path = write_glove(tmp_path / "v.txt", _vectors(WORDS))
    open_embeddings(str(path), cache_dir=tmp_path / "built").close()
    (tmp_path / "built" / "embeddings").rename(tmp_path / "earlier")  # the layout under an older --cache-dir
    with open_embeddings(str(path), cache_dir=tmp_path / "earlier") as emb:
        assert emb.lookup(["the"])[1].tolist() == [True]
    assert not (tmp_path / "earlier" / "embeddings").exists()


def test_map_grows_when_the_guess_is_too_small(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_mod, "_initial_map_size", lambda source, fmt: 1 << 16)
    monkeypatch.setattr(cache_mod, "_BATCH_RECORDS", 500)
    vectors = _vectors([f"w{i}" for i in range(3000)], dim=32)
    with open_embeddings(str(write_w2v_binary(tmp_path / "v.bin", vectors))) as emb:
        assert emb.size == 3000
        _check_all(emb, vectors)


def test_losing_a_build_race_discards_own_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process publishes the same cache while this one is still building."""
    vectors = _vectors(WORDS)
    path = write_glove(tmp_path / "v.txt", vectors)
    real_publish = cache_mod._publish
    outcomes: list[bool] = []

    def publish_after_rival(temp: Path, final: Path) -> bool:
        monkeypatch.setattr(cache_mod, "_publish", real_publish)
        open_embeddings(str(path)).close()  # the rival wins
        outcomes.append(real_publish(temp, final))
        return outcomes[-1]

    monkeypatch.setattr(cache_mod, "_publish", publish_after_rival)
    with open_embeddings(str(path)) as emb:
        _check_all(emb, vectors)
    assert outcomes == [False]
    assert len(list((tmp_path / "cache" / "embeddings").iterdir())) == 1  # loser's temp folder removed


def test_two_processes_build_the_same_cache(tmp_path: Path) -> None:
    vectors = _vectors([f"w{i}" for i in range(20000)], dim=16)
    path = write_glove(tmp_path / "v.txt", vectors)
    script = (
        "import sys; from textorch.embeddings import open_embeddings\n"
        "e = open_embeddings(sys.argv[1]); v, f = e.lookup(['w0', 'w19999'])\n"
        "print(int(f.sum()), repr(float(v.sum())))\n"
    )
    env = {**os.environ, "TEXTORCH_CACHE_DIR": str(tmp_path / "cache")}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(path)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    expected = float(vectors["w0"].sum() + vectors["w19999"].sum())
    for out in outputs:
        count, total = out.split()
        assert int(count) == 2 and float(total) == pytest.approx(expected, rel=1e-5)
    assert len(list((tmp_path / "cache" / "embeddings").iterdir())) == 1


def test_memo_stays_bounded(tmp_path: Path) -> None:
    vectors = _vectors([f"w{i}" for i in range(3000)])
    with open_embeddings(str(write_glove(tmp_path / "v.txt", vectors))) as emb:
        emb._memo_max = 1024
        _check_all(emb, vectors)
        assert len(emb._memo) == 1024
        _check_all(emb, vectors)  # evicted words are fetched again, correctly


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_lookup_in_forked_child(tmp_path: Path) -> None:
    """DataLoader workers inherit the open cache across fork(); LMDB must be reopened there."""
    vectors = _vectors(WORDS)
    with open_embeddings(str(write_glove(tmp_path / "v.txt", vectors))) as emb:
        emb.lookup(["the"])
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: bypass the memo so the cache itself is read
            try:
                emb._memo.clear()
                got, found = emb.lookup(["Paris"])
                os.write(write_end, got.tobytes() + bytes([int(found.all())]))
            finally:
                os._exit(0)
        os.close(write_end)
        payload = os.read(read_end, 1024)
        os.close(read_end)
        os.waitpid(pid, 0)
        assert payload[-1] == 1
        np.testing.assert_array_equal(np.frombuffer(payload[:-1], "<f4"), vectors["Paris"])
        np.testing.assert_array_equal(emb.lookup(["Paris"])[0][0], vectors["Paris"])


def test_describe_and_check_matches(tmp_path: Path) -> None:
    a = write_glove(tmp_path / "a.txt", _vectors(WORDS, seed=1))
    b = write_glove(tmp_path / "b.txt", _vectors(WORDS, seed=2))
    with open_embeddings(str(a)) as ea, open_embeddings(str(b)) as eb:
        desc = ea.describe()
        assert desc == {"name": "a.txt", "path": str(a), "dim": DIM, "fingerprint": ea.fingerprint}
        assert json.loads(json.dumps(desc)) == desc
        ea.check_matches(desc)
        with pytest.raises(ConfigError) as info:
            eb.check_matches(desc)
    assert ea.fingerprint in str(info.value) and eb.fingerprint in str(info.value)


def test_none_spec() -> None:
    assert open_embeddings("none") is None
    assert open_embeddings("None") is None


def _registry(tmp_path: Path, file: str, entries: list[dict[str, object]]) -> Path:
    reg = tmp_path / file
    reg.parent.mkdir(parents=True, exist_ok=True)
    reg.write_text(json.dumps({"embeddings": entries}), encoding="utf-8")
    return reg


def test_registry_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vectors = _vectors(WORDS)
    write_glove(tmp_path / "v.txt", vectors)
    entry = {"name": "small", "path": str(tmp_path / "v.txt"), "dim": DIM, "lang": "en"}
    default = _registry(tmp_path, "home/.config/textorch/embeddings.json", [entry])
    with open_embeddings("small") as emb:  # default location
        assert emb.name == "small"
        _check_all(emb, vectors)
    from_env = _registry(tmp_path, "env.json", [{**entry, "name": "env-small"}])
    monkeypatch.setenv("TEXTORCH_EMBEDDINGS_REGISTRY", str(from_env))
    assert resolve_spec("env-small").name == "env-small"
    with pytest.raises(ConfigError, match="known names: env-small"):
        resolve_spec("small")  # the env var replaces the default registry
    assert resolve_spec("small", registry=default).path == tmp_path / "v.txt"
    relative = _registry(tmp_path, "rel.json", [{"name": "rel", "path": "v.txt", "dim": DIM}])
    assert resolve_spec("rel", registry=relative).path == tmp_path / "v.txt"


def test_registry_errors(tmp_path: Path) -> None:
    write_glove(tmp_path / "v.txt", _vectors(WORDS))
    reg = _registry(
        tmp_path,
        "reg.json",
        [
            {"name": "glove-840B", "path": str(tmp_path / "v.txt"), "dim": 300},
            {"name": "gone", "path": str(tmp_path / "gone.txt"), "dim": DIM},
        ],
    )
    with pytest.raises(ConfigError, match="says dim 300 but .* has dim 4"):
        open_embeddings("glove-840B", registry=reg)
    with pytest.raises(ConfigError) as info:
        open_embeddings("glove-6B", registry=reg)
    message = str(info.value)
    assert "glove-6B" in message and "glove-840B, gone" in message and "path" in message
    with pytest.raises(ConfigError, match="gone.txt not found"):
        open_embeddings("gone", registry=reg)
    with pytest.raises(ConfigError, match="does not exist"):
        open_embeddings("glove-6B", registry=tmp_path / "missing.json")
    assert resolve_spec(str(tmp_path / "v.txt"), registry=tmp_path / "missing.json").dim is None
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot read embeddings registry"):
        open_embeddings("x", registry=tmp_path / "broken.json")


def _shared_embeddings() -> Path:
    default = Path(__file__).resolve().parents[3] / "shared" / "embeddings"
    return Path(os.environ.get("TEXTORCH_SHARED_EMBEDDINGS", default))


@pytest.mark.real_data
def test_real_vectors(tmp_path: Path) -> None:
    path = _shared_embeddings() / "w2v-conll-grobid-100d.txt"
    if not path.exists():
        pytest.skip(f"{path} not found: set TEXTORCH_SHARED_EMBEDDINGS")
    with open_embeddings(str(path), cache_dir=tmp_path / "real") as emb:
        assert (emb.dim, emb.size) == (100, 38962)
        vectors, found = emb.lookup(["the", "The", "Zzyzx-not-a-word"])
    assert found.tolist() == [True, True, False]
    assert np.abs(vectors[0]).sum() > 0 and not vectors[2].any()
    started = time.perf_counter()
    with open_embeddings(str(path), cache_dir=tmp_path / "real") as emb:
        again, _ = emb.lookup(["the"])
    reopen = time.perf_counter() - started
    np.testing.assert_array_equal(again[0], vectors[0])
    print(f"second open + lookup: {reopen * 1000:.1f} ms")


def test_one_cache_open_twice_in_a_process(tmp_path: Path) -> None:
    """Two trainings on the same vectors in one program (n-fold, the API in a loop) share the
    cache: py-lmdb alone refuses a second open of one path."""
    vectors = _vectors(WORDS)
    path = write_glove(tmp_path / "v.txt", vectors)
    first = open_embeddings(str(path))
    second = open_embeddings(str(path))
    _check_all(second, vectors)
    first.close()
    _check_all(second, vectors)  # still open: the other user closed its share only
    second.close()
    with open_embeddings(str(path)) as third:
        _check_all(third, vectors)
