"""The suite's training runs: every job and seed trained by each system, and one scorer for all.

Training is where the suite spends most of its hours and where its F1 comes from, so what
makes two runs comparable lives together here: the order of the systems per seed, the options
each runner's ``train`` gets (the benchmark's fixed settings, or each system's own defaults),
Wapiti's run as GROBID trains it, and the scoring of every run's test predictions by one
scorer (``f1_bootstrap``) rather than by each library's own.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.peers import f1_bootstrap
from benchmarks.peers import wapiti_peer
from benchmarks.peers.suite_runner import Runner


def first_system(seed: int) -> str:
    """Which system trains first for ``seed``: DeLFT for odd seeds, textorch for even ones. A
    system always second would always train on a machine warmed (or slowed) by the other's
    run; the training ratios pair each seed's two runs (``bench_table``)."""
    return "delft" if seed % 2 else "textorch"


def _training_options(job: dict, seed: int) -> tuple[list[str], list[str]]:
    """The options of each runner's ``train`` (DeLFT, textorch) for a job and seed, beyond the
    files: the benchmark's fixed settings, or with ``job["app"]`` each system's own
    application defaults (DeLFT's ``configure()``, textorch's presets)."""
    common = ["--task", job["task"], "--architecture", job["architecture"], "--seed", str(seed)]
    if job.get("transformer"):
        common += ["--transformer", job["transformer"]]
    if job.get("app"):
        return [*common, "--defaults", job["app"]], [*common, "--preset", job["app"]]
    fixed = ["--epochs", str(job["epochs"]), "--patience", str(job["epochs"] + 1), "--batch-size", "32"]
    return [*common, *fixed], [*common, *fixed, *_textorch_training_rules(job["task"])]


def _textorch_training_rules(task: str) -> list[str]:
    """What textorch's application for ``task`` trains with beyond the fixed settings (its presets):
    DeLFT's rate cut on a validation plateau, which DeLFT applies in every run with a validation
    set, and for the GROBID corpora DeLFT's random batches (``textorch grobid``'s choice)."""
    rules = ["--train-option", "lr_decay=0.5"]
    if task != "conll":
        rules += ["--train-option", "bucket_batches=1"]
    return rules


def train_all(r: Runner, jobs: list[dict], files: dict, seeds: list[int], vectors: Path,
              bf16_tasks: tuple[str, ...] = (), systems: tuple[str, ...] = ("delft", "textorch"),
              keep_models: bool = False, textorch_options: tuple[str, ...] = ()) -> list[dict]:
    """Train every job for every seed with both systems (in the order of :func:`first_system`);
    keep the first seed's models (with ``keep_models``, also those of runs at each system's
    defaults). For ``bf16_tasks``, textorch trains once more under bf16
    autocast (system ``textorch_bf16``). Every run writes its test predictions, scored here
    by one scorer for both systems (:func:`score_predictions`).

    ``systems`` leaves out DeLFT or textorch, or adds Wapiti: trained once per GROBID task and
    seed, as GROBID trains it, after the others (``wapiti_peer``; key ``TASK-wapiti``).
    ``textorch_options``: ``FIELD=VALUE`` overrides of textorch's training configuration
    (the runner's ``--train-option``), e.g. to try a new default side by side."""
    runs = []
    wapiti_done: set[tuple[str, int]] = set()
    predictions = r.work / "predictions"
    predictions.mkdir(parents=True, exist_ok=True)
    for job in jobs:
        for seed in job.get("seeds", seeds):
            f = files[(job["task"], seed)]
            save = seed == job.get("seeds", seeds)[0] and (keep_models or not job.get("app"))
            tag = f"{job['key']}-s{seed}"
            delft_common, textorch_common = _training_options(job, seed)
            delft_name = f"bench-{tag}"
            delft_args = ["train", *delft_common, "--format", f.format, "--model-name", delft_name,
                          *[a for role in ("train", "valid", "test") for a in (f"--{role}", f.delft[role])]]
            if save:
                delft_args += ["--output", str(r.work / "models" / "delft")]
            textorch_common += [a for option in textorch_options for a in ("--train-option", option)]
            textorch_args = ["train", *textorch_common, "--format", f.format,
                             *[a for role in ("train", "valid", "test") for a in (f"--{role}", f.textorch[role])]]
            if not job.get("transformer"):
                textorch_args += ["--embeddings", str(vectors)]
            unsaved = list(textorch_args)
            if save:
                textorch_args += ["--output", str(r.work / "models" / "textorch" / tag)]
            variants = [("delft", "delft", delft_args), ("textorch", "textorch", textorch_args)]
            if first_system(seed) != "delft":
                variants.reverse()
            if job["task"] in bf16_tasks and not job.get("transformer"):
                variants.append(("textorch_bf16", "textorch", [*unsaved, "--precision", "bf16"]))
            variants = [v for v in variants if v[1] in systems]
            if "wapiti" in systems and f.format == "grobid" and not job.get("transformer") \
                    and (job["task"], seed) not in wapiti_done:
                wapiti_done.add((job["task"], seed))
                written = predictions / f"wapiti-{job['task']}-s{seed}.json"
                variants.append(("wapiti", "wapiti", wapiti_peer.train_args(r.work, r.wapiti, job["task"], seed, f, written,
                                                                            r.wapiti_time_limit, r.wapiti_iterations)))
            for label, system, args in variants:
                if system == "wapiti":
                    runs.extend(_train_wapiti(r, job["task"], seed, args))
                    continue
                print(f"train {label:8s} {tag} ...", end=" ", flush=True)
                written = predictions / f"{label}-{tag}.json"
                written.unlink(missing_ok=True)  # an earlier run's
                name = f"train-{label}-{tag}" if label != system else f"train-{tag}"
                payload, wall = r.runner(system, name, [*args, "--predictions", str(written)])
                if payload:
                    payload.update(key=job["key"], wall_s=wall, system=label, **score_predictions(written))
                    runs.append(payload)
                    print(f"F1 {payload['f1']:.4f}  {payload['epochs']} epochs  {payload['train_tokens_per_s']:.0f} tok/s"
                          f"  {wall:.0f}s", flush=True)
    return runs


def _train_wapiti(r: Runner, task: str, seed: int, args: list[str]) -> list[dict]:
    """One Wapiti run (``wapiti_runner.py train``), scored as the others; [] when it failed."""
    print(f"train wapiti   {task}-s{seed} ...", end=" ", flush=True)
    written = Path(args[args.index("--predictions") + 1])
    written.unlink(missing_ok=True)  # an earlier run's
    payload, wall = r.runner("wapiti", f"train-{task}-s{seed}", args)
    if not payload:
        return []
    payload.update(key=f"{task}-wapiti", wall_s=wall, **score_predictions(written))
    payload["f1"] = payload.get("f1_counts")
    print(f"F1 {payload['f1']:.4f}  {payload['iterations']} iterations  {payload['whole_s']:.0f}s", flush=True)
    return [payload]


def score_predictions(path: Path) -> dict:
    """Per-sequence entity counts of a run's test predictions (``test_counts``: tp, fp, fn per
    sequence), the fingerprint of the gold entities they were counted against (``gold_digest``,
    for pairing), and the F1 they make (``f1_counts``, beside the library's own ``f1``)."""
    if not path.exists():
        return {}
    written = json.loads(path.read_text(encoding="utf-8"))
    counts = f1_bootstrap.sequence_counts(written["gold"], written["pred"])
    return {"test_counts": counts.tolist(), "gold_digest": f1_bootstrap.gold_digest(written["gold"]),
            "f1_counts": float(f1_bootstrap.f1(counts.sum(axis=0)))}
