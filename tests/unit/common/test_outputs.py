"""The folder rule (raydistill/common/outputs.py, docs/RELIABILITY.md): a command writes its result into the folder
the user
names and never deletes what it did not write. A folder holding other files is refused before any work (one line,
exit 2) unless ``--overwrite``; then those files stay beside the result. A folder holding an earlier result (its
marker) takes the new one without a flag, whole or not at all."""

from __future__ import annotations

import json
import os
import signal

import pytest

from raydistill.common import outputs
from raydistill.common.errors import UserError
from raydistill.common.outputs import MARKER, check_output, publish, staging, written
from raydistill.teacher.fit import DONE

USER_FILE = "notes.txt"


def _result(root, files: dict) -> str:
    src = staging(root)
    for rel, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
        with open(os.path.join(src, rel), "w") as f:
            f.write(text)
    return src


def _user_folder(path) -> str:
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, USER_FILE), "w") as f:
        f.write("mine")
    return str(path)


def _siblings(dest) -> list[str]:
    return sorted(n for n in os.listdir(os.path.dirname(dest)) if n != os.path.basename(dest))


def test_a_new_folder_gets_the_result_and_its_marker(tmp_path):
    dest = str(tmp_path / "out")
    publish(_result(dest, {"a.bin": "1", "sub/b.txt": "2"}), dest, "test")
    assert sorted(os.listdir(dest)) == sorted([MARKER, "a.bin", "sub"]) and written(dest) == ["a.bin", "sub/b.txt"]
    assert _siblings(dest) == []  # no staging folder left behind


def test_a_result_replaces_the_one_its_marker_lists_and_leaves_everything_else(tmp_path):
    dest = str(tmp_path / "out")
    publish(_result(dest, {"a.bin": "old", "gone.bin": "old", "sub/b.txt": "old"}), dest, "test")
    _user_folder(dest)  # a file the user put beside an earlier result
    check_output(dest, "output")  # carries the marker: no flag needed
    publish(_result(dest, {"a.bin": "new"}), dest, "test")
    assert open(os.path.join(dest, "a.bin")).read() == "new"
    assert sorted(os.listdir(dest)) == sorted([MARKER, "a.bin", USER_FILE])  # the old result's other files went
    assert open(os.path.join(dest, USER_FILE)).read() == "mine" and written(dest) == ["a.bin"]


def test_a_folder_holding_other_files_is_refused_unless_overwrite(tmp_path):
    from raydistill.common.errors import UserError

    dest = _user_folder(tmp_path / "out")
    with pytest.raises(UserError) as e:
        check_output(dest, "output")
    assert e.value.field == "output" and "did not write" in str(e.value) and "--overwrite" in str(e.value)
    check_output(dest, "output", overwrite=True)
    check_output(str(tmp_path / "empty"), "output")  # not there yet: fine
    os.makedirs(tmp_path / "empty")
    check_output(str(tmp_path / "empty"), "output")  # empty: fine
    with open(os.path.join(dest, "a.bin"), "w") as f:
        f.write("the user's a.bin")
    publish(_result(dest, {"a.bin": "new", "c.bin": "new"}), dest, "test")  # what --overwrite lets through
    assert open(os.path.join(dest, "a.bin")).read() == "new"  # same name: replaced
    assert open(os.path.join(dest, USER_FILE)).read() == "mine" and written(dest) == ["a.bin", "c.bin"]


def test_a_failure_part_way_leaves_the_old_result_whole(tmp_path, monkeypatch):
    dest = str(tmp_path / "out")
    publish(_result(dest, {"a.bin": "old", "b.bin": "old"}), dest, "test")
    _user_folder(dest)
    before = {n: open(os.path.join(dest, n)).read() for n in os.listdir(dest)}
    src = _result(dest, {"a.bin": "new", "b.bin": "new", "c.bin": "new"})
    real, calls = os.replace, []

    def flaky(a, b):
        calls.append(a)
        if len(calls) == 4:  # after the old files went aside and one new file went in
            raise OSError("disk full")
        return real(a, b)

    monkeypatch.setattr(outputs.os, "replace", flaky)
    with pytest.raises(OSError):
        publish(src, dest, "test")
    monkeypatch.setattr(outputs.os, "replace", real)
    assert {n: open(os.path.join(dest, n)).read() for n in os.listdir(dest)} == before
    assert _siblings(dest) == []  # no staging or backup folder left


def test_a_failed_publish_leaves_the_callers_folder_whole(tmp_path, monkeypatch):
    """The folder published may be a caller's own (finetune publishes its checkpoint's best student): a move that fails
    part-way (a cross-device link, a full disk) puts the files moved back, and the folder stays, for the next try."""
    dest = str(tmp_path / "out")
    publish(_result(dest, {"a.bin": "old"}), dest, "test")
    src = tmp_path / "checkpoint" / "best_student"
    src.mkdir(parents=True)
    for n in ("a.bin", "b.bin", "c.bin"):
        (src / n).write_text("new " + n)
    real, calls = os.replace, []

    def flaky(a, b):
        calls.append(a)
        if len(calls) == 3:  # the old file set aside, one new file in
            raise OSError(18, "Invalid cross-device link")
        return real(a, b)

    monkeypatch.setattr(outputs.os, "replace", flaky)
    with pytest.raises(OSError):
        publish(str(src), dest, "test")
    monkeypatch.setattr(outputs.os, "replace", real)
    assert {n: (src / n).read_text() for n in os.listdir(src)} == {n: "new " + n for n in ("a.bin", "b.bin", "c.bin")}
    assert open(os.path.join(dest, "a.bin")).read() == "old"


def test_a_result_folder_on_another_disk_than_its_parent_stages_inside_it(tmp_path, monkeypatch):
    """A mount point or a link to another disk as the result folder: its staging and backup folders are made inside
    it, so every move is a rename on its own disk (beside it, each move failed as a cross-device link)."""
    dest = tmp_path / "mounted"
    dest.mkdir()
    real = outputs._device
    monkeypatch.setattr(outputs, "_device", lambda p: 7 if os.path.realpath(p) == str(dest) else real(p))
    assert os.path.dirname(outputs.staging(str(dest))) == str(dest)
    assert os.path.dirname(outputs.staging(str(tmp_path / "plain"))) == str(tmp_path)


def test_a_file_written_in_place_over_a_users_is_refused_unless_overwrite(tmp_path):
    """best --export DIR --onnx writes model.onnx into its result after publishing it: a model.onnx of the user's
    there is refused before any work, one of its own is not."""
    dest = str(tmp_path / "out")
    publish(_result(dest, {"model.safetensors": "w"}), dest, "test")
    outputs.check_in_place(dest, ["model.onnx"], "export")  # none there
    with open(os.path.join(dest, "model.onnx"), "w") as f:
        f.write("mine")
    with pytest.raises(UserError) as e:
        outputs.check_in_place(dest, ["model.onnx", "model.int8.onnx"], "export")
    assert e.value.field == "export" and "holds model.onnx, which raydistill did not write" in e.value.message
    outputs.check_in_place(dest, ["model.onnx"], "export", overwrite=True)
    os.remove(os.path.join(dest, "model.onnx"))  # the user moved it away
    with outputs.adding_to(dest, "test"):
        with open(os.path.join(dest, "model.onnx"), "w") as f:
            f.write("ours")
    outputs.check_in_place(dest, ["model.onnx"], "export")  # its own now


def test_what_is_logged_of_a_result_is_its_files_only(tmp_path):
    """distill logs its student to MLflow from a view of its --output holding the files the marker lists: a file of
    the user's beside them (an ONNX export of an older student) is never logged with the new one."""
    dest = str(tmp_path / "out")
    publish(_result(dest, {"config.json": "{}", "sub/vocab.txt": "v"}), dest, "test")
    with open(os.path.join(dest, "model.onnx"), "w") as f:
        f.write("an older student's")
    with outputs.result_view(dest) as view:
        assert sorted(os.path.relpath(os.path.join(d, n), view) for d, _, ns in os.walk(view) for n in ns) == [
            "config.json",
            os.path.join("sub", "vocab.txt"),
        ]
    assert not os.path.exists(view) and os.path.isfile(os.path.join(dest, "model.onnx"))
    bare = tmp_path / "bare"  # no marker: the folder as it is
    bare.mkdir()
    with outputs.result_view(str(bare)) as view:
        assert view == str(bare)


def test_a_ctrl_c_during_the_move_arrives_after_it(tmp_path, monkeypatch):
    """SIGINT/SIGTERM are held while the files move: the folder holds the new result whole, then the interrupt. A
    command has other threads (Ray's, MLflow's): blocking the signal in the main thread alone let it through them."""
    import threading

    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    dest = str(tmp_path / "out")
    publish(_result(dest, {"a.bin": "old", "b.bin": "old"}), dest, "test")
    src = _result(dest, {"a.bin": "new", "b.bin": "new"})
    real, sent = outputs._move, []

    def move(a, b, rel):
        if not sent:
            sent.append(os.kill(os.getpid(), signal.SIGINT))
        return real(a, b, rel)

    monkeypatch.setattr(outputs, "_move", move)
    with pytest.raises(KeyboardInterrupt):
        publish(src, dest, "test")
        for _ in range(10**6):  # (it would be raised here, at the latest)
            pass
    assert {n: open(os.path.join(dest, n)).read() for n in ("a.bin", "b.bin")} == {"a.bin": "new", "b.bin": "new"}
    stop.set()


# ---- the commands: refused before any work, one line, exit 2, the user's file untouched ----


def _refused(main, argv, flag, folder, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1, err
    assert err[0].startswith(f"error: {flag}: ") and "did not write" in err[0] and "--overwrite" in err[0], err
    assert sorted(os.listdir(folder)) == [USER_FILE] and open(os.path.join(folder, USER_FILE)).read() == "mine"


def test_every_result_command_refuses_a_folder_of_the_users(tiny_teacher, glue_dir, tmp_path, capsys, monkeypatch):
    from raydistill.commands import best, finetune
    from raydistill.distill import augment
    from raydistill.distill.__main__ import main as distill

    folder = _user_folder(tmp_path / "mine")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    common = ["--task", "sst2", "--data-dir", glue_dir, "--tracking-uri", uri]
    teacher, encoder = tiny_teacher("classification", 2), tiny_teacher("base")
    capsys.readouterr()
    _refused(distill, ["--method", "kd", "--teacher", teacher, "--output", folder, *common], "output", folder, capsys)
    _refused(finetune.main, ["--model", encoder, "--output", folder, *common], "output", folder, capsys)
    _refused(
        augment.main,
        ["--task", "sst2", "--data-dir", glue_dir, "--teacher", encoder, "--output", folder],
        "output",
        folder,
        capsys,
    )
    _refused(best.main, ["--experiment", "e", "--tracking-uri", uri, "--export", folder], "export", folder, capsys)
    monkeypatch.chdir(folder)  # `best --export .` in a project folder
    _refused(best.main, ["--experiment", "e", "--tracking-uri", uri, "--export", "."], "export", folder, capsys)


def _logged_student(uri: str, teacher: str, tmp_path) -> None:
    """A finished trial run with a ``student`` artifact, as a sweep logs it."""
    from raydistill.tracking.track import Tracker

    tracker = Tracker(uri, "e")
    rid = tracker.start_run("t1", {"task": "sst2"}, tags={"raydistill.trial_id": "t1"})
    tracker.log_metrics(rid, {"best_val_accuracy": 0.8})
    tracker.log_artifacts(rid, teacher, "student")
    tracker.end_run(rid)


def test_best_export_with_overwrite_keeps_the_users_file_and_rewrites_its_own_result(tiny_teacher, tmp_path, capsys):
    from raydistill.commands import best

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    teacher = tiny_teacher("classification", 2)
    _logged_student(uri, teacher, tmp_path)
    folder = _user_folder(tmp_path / "mine")
    argv = ["--experiment", "e", "--tracking-uri", uri, "--export", folder]
    best.main([*argv, "--overwrite"])
    assert sorted(os.listdir(folder)) == sorted([USER_FILE, MARKER, *os.listdir(teacher)])
    assert open(os.path.join(folder, USER_FILE)).read() == "mine"
    best.main(argv)  # its own result: no flag needed, the user's file still there
    assert open(os.path.join(folder, USER_FILE)).read() == "mine" and written(folder) == sorted(os.listdir(teacher))
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["export"] == folder
    with open(os.path.join(folder, "model.onnx"), "w") as f:
        f.write("mine")  # the user's own ONNX file beside raydistill's result: --onnx would write over it
    with pytest.raises(SystemExit) as e:
        best.main([*argv, "--onnx"])
    assert e.value.code == 2 and "holds model.onnx, which raydistill did not write" in capsys.readouterr().err
    assert open(os.path.join(folder, "model.onnx")).read() == "mine"


def test_best_never_exports_into_the_artifacts_it_reads(tiny_teacher, tmp_path, capsys):
    """--export inside (or holding) the local artifact folder of the experiment best reads would write over the logged
    models it exports from: refused, --overwrite or not, once the experiment is known."""
    from urllib.parse import urlparse

    from mlflow.tracking import MlflowClient

    from raydistill.commands import best

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _logged_student(uri, tiny_teacher("classification", 2), tmp_path)
    loc = MlflowClient(uri).get_experiment_by_name("e").artifact_location
    store = urlparse(loc).path if "://" in loc else loc
    for export in (os.path.join(store, "models", "x"), os.path.dirname(store)):
        with pytest.raises(SystemExit) as e:
            best.main(["--experiment", "e", "--tracking-uri", uri, "--export", export, "--overwrite"])
        assert e.value.code == 2 and "the artifacts of the MLflow experiment best reads" in capsys.readouterr().err
    assert not os.path.exists(os.path.join(store, "models", "x"))


def test_finetune_and_augment_with_overwrite_keep_the_users_file(tiny_teacher, glue_dir, tmp_path):
    from transformers import AutoModelForSequenceClassification

    from raydistill.commands import finetune
    from raydistill.distill import augment

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    folder = _user_folder(tmp_path / "teacher")
    argv = [
        "--model",
        tiny_teacher("base"),
        "--output",
        folder,
        "--task",
        "sst2",
        "--data-dir",
        glue_dir,
        "--epochs",
        "1",
        "--max-steps",
        "2",
        "--batch-size",
        "8",
        "--max-length",
        "16",
        "--eval-limit",
        "16",
        "--tracking-uri",
        uri,
        "--experiment",
        "ft",
    ]
    finetune.main([*argv, "--overwrite"])
    AutoModelForSequenceClassification.from_pretrained(folder)
    assert open(os.path.join(folder, USER_FILE)).read() == "mine" and DONE in written(folder)
    finetune.main([*argv[:-4], "--max-steps", "3", *argv[-4:]])  # a new result into its own folder: no flag
    assert json.load(open(os.path.join(folder, DONE)))["config"]["max_steps"] in (3, "3")
    assert open(os.path.join(folder, USER_FILE)).read() == "mine"
    assert not os.path.exists(folder + ".resume")

    aug = _user_folder(tmp_path / "aug")
    os.makedirs(os.path.join(aug, "cache"))
    with open(os.path.join(aug, "cache", "notes.jsonl"), "w") as f:
        f.write("mine\n")  # the user's, in the folder augment keeps its cache in
    a_argv = [
        "--task",
        "sst2",
        "--data-dir",
        glue_dir,
        "--teacher",
        tiny_teacher("base"),
        "--output",
        aug,
        "--n",
        "1",
        "--limit",
        "8",
    ]
    augment.main([*a_argv, "--overwrite"])
    augment.main(a_argv)  # its own result again (the cache reused)
    assert open(os.path.join(aug, USER_FILE)).read() == "mine"
    assert {"train.jsonl", "augment.json"} <= set(written(aug)) and any(f.startswith("cache/") for f in written(aug))
    assert "cache/notes.jsonl" not in written(aug)  # never listed as augment's: a later --overwrite leaves it


def test_general_distillation_holds_out_the_same_text_whatever_the_seed(tmp_path):
    """Runs of general distillation with different seeds were scored on different held-out rows (the split followed
    ``--seed``), so their MLM losses did not compare."""
    from types import SimpleNamespace as NS

    from raydistill.data.splits import general_examples

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"line {i}" for i in range(50)))

    def held_out(seed):
        return general_examples(NS(unlabeled_text=str(corpus), train=NS(seed=seed, train_limit=None, eval_limit=None)))[
            1
        ]

    assert held_out(1) == held_out(2) == held_out(42) and len(held_out(1)) == 5


# ------------------------------------------------------------------ ownership (issue 45): whose result, what is read
def _files_of(folder) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes: what must come out of a refusal unchanged."""
    out = {}
    for d, _, names in os.walk(folder):
        for n in names:
            with open(os.path.join(d, n), "rb") as f:
                out[os.path.relpath(os.path.join(d, n), folder)] = f.read()
    return out


def test_a_command_replaces_only_its_own_kind_of_result(tmp_path):
    """The marker records the command and the kind; another command's result needs --overwrite. A marker written
    before kinds were recorded has the kind of the command it names; one naming none is of unknown origin."""
    from raydistill.common.errors import UserError

    dest = str(tmp_path / "teacher")
    publish(_result(dest, {"config.json": "{}"}), dest, "raydistill finetune")
    mark = json.load(open(os.path.join(dest, MARKER)))
    assert (mark["written_by"], mark["kind"]) == ("raydistill finetune", "teacher")
    check_output(dest, "output", command="raydistill finetune")  # a re-run: no flag
    for command in ("raydistill distill", "raydistill best --export", "raydistill data split", "raydistill augment"):
        with pytest.raises(UserError) as e:
            check_output(dest, "output", command=command)
        assert e.value.field == "output" and "holds a teacher written by raydistill finetune" in str(e.value)
        assert "--overwrite" in str(e.value)
        check_output(dest, "output", overwrite=True, command=command)  # the user said so
    with open(os.path.join(dest, MARKER), "w") as f:  # as raydistill wrote it before kinds were recorded
        json.dump({"written_by": "raydistill distill", "files": ["config.json"]}, f)
    check_output(dest, "output", command="raydistill distill")
    with pytest.raises(UserError, match="holds a student written by raydistill distill"):
        check_output(dest, "output", command="raydistill best --export")
    with open(os.path.join(dest, MARKER), "w") as f:
        json.dump({"files": ["config.json"]}, f)
    with pytest.raises(UserError, match="a result of unknown origin"):
        check_output(dest, "output", command="raydistill distill")


def test_no_folder_a_command_reads_is_written_into(tmp_path):
    """``--output``/``--export`` equal to, inside or holding a folder the command reads, or holding a file it reads,
    compared after realpath; refused whatever --overwrite says. A folder beside a file it reads is fine."""
    from types import SimpleNamespace as NS

    from raydistill.common.errors import UserError
    from raydistill.common.outputs import check_not_read

    teacher, data, project = tmp_path / "t", tmp_path / "glue", tmp_path / "project"
    for d in (teacher, data, project):
        d.mkdir()
    (project / "reviews.csv").write_text("text,label\n")
    os.symlink(teacher, tmp_path / "link")
    reads = NS(teacher=str(teacher), data_dir=str(data), train_file=str(project / "reviews.csv"), model="bert-base")

    def refused(out, says):
        with pytest.raises(UserError) as e:
            check_not_read(str(out), "output", reads)
        assert e.value.field == "output" and says in str(e.value) and "another folder" in str(e.value), str(e.value)

    refused(teacher, "is the folder --teacher reads")
    refused(tmp_path / "link", "is the folder --teacher reads")  # the same folder through a link
    refused(project / ".." / "t", "is the folder --teacher reads")
    refused(teacher / "student", "lies inside")
    refused(tmp_path, "holds")
    refused(data / "SST-2", "lies inside")
    refused(project, "which --train-file reads")  # the file's own folder: its result would sit on the file
    check_not_read(str(project / "student"), "output", reads)  # beside the file, not on it
    check_not_read(str(tmp_path / "bert-base"), "output", reads)  # a hub name is no folder of the user's
    with pytest.raises(UserError, match="--init reads"):
        check_not_read(str(teacher), "output", NS(init=f"checkpoint:{teacher}"))


def test_the_folder_a_finetune_keeps_its_epochs_in_is_its_own(tmp_path):
    """``OUTPUT.resume`` is created by the product with its marker and removed only carrying it; a user's folder of
    that name is refused; an older raydistill's (no marker, its record and files only) is adopted."""
    from raydistill.common.errors import UserError
    from raydistill.common.outputs import owner, remove_if_ours
    from raydistill.teacher.fit import RESUME_FILES, RESUME_KIND, ResumeRecord, check_resume_folder

    out = str(tmp_path / "teacher")
    record = ResumeRecord(out, "fp")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "w.bin").write_text("1")
    record.keep(str(ckpt), 1)
    assert owner(out + ".resume") == ("raydistill finetune", RESUME_KIND)
    check_resume_folder(out)
    (tmp_path / "teacher.resume" / USER_FILE).write_text("mine")  # the user's file put in it: not removed
    remove_if_ours(record.folder, RESUME_KIND, RESUME_FILES)
    assert open(os.path.join(record.folder, USER_FILE)).read() == "mine"
    with pytest.raises(UserError) as e:
        check_resume_folder(out)
    assert e.value.field == "output" and "move it away or choose another --output" in str(e.value)
    users = _user_folder(tmp_path / "x.resume")  # a user's folder that happens to have the name
    with pytest.raises(UserError):
        check_resume_folder(str(tmp_path / "x"))
    assert os.listdir(users) == [USER_FILE]
    old = tmp_path / "old.resume"  # an older raydistill's record: adopted, then removed whole at the end
    (old / "checkpoint").mkdir(parents=True)
    (old / "resume.json").write_text(json.dumps({"fingerprint": "f", "run_id": "r", "epoch": 1}))
    check_resume_folder(str(tmp_path / "old"))
    assert owner(str(old)) == ("raydistill finetune", RESUME_KIND)
    remove_if_ours(str(old), RESUME_KIND, RESUME_FILES)
    assert not old.exists()


def _fail_if_called(what):
    def fail(*a, **k):
        raise AssertionError(f"{what} was called: the folder was not refused up front")

    return fail


def test_distill_into_the_teacher_it_reads_is_refused_and_the_teacher_kept(
    tiny_teacher, glue_dir, tmp_path, capsys, monkeypatch
):
    """`finetune --output T`, then `distill --teacher T --output T` replaced the teacher by a 2-layer student (exit 0);
    now one line naming both flags, exit 2, before Ray, --overwrite or not, and the teacher's bytes unchanged."""
    from raydistill.commands import finetune
    from raydistill.distill.__main__ import main as distill
    from raydistill.orchestrate import connect

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    teacher = str(tmp_path / "T")
    small = ["--epochs", "1", "--max-steps", "2", "--batch-size", "8", "--max-length", "16", "--eval-limit", "16"]
    common = ["--task", "sst2", "--data-dir", glue_dir, "--tracking-uri", uri, *small]
    finetune.main(["--model", tiny_teacher("base"), "--output", teacher, *common])
    before = _files_of(teacher)
    monkeypatch.setattr(connect, "init_ray", _fail_if_called("init_ray"))
    capsys.readouterr()
    argv = ["--method", "kd", "--teacher", teacher, "--output", teacher, "--student-layers", "2", *common]
    for extra in ([], ["--overwrite"]):
        with pytest.raises(SystemExit) as e:
            distill([*argv, *extra])
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1, err
        assert err[0].startswith(f"error: output: {os.path.realpath(teacher)} is ") and "--teacher reads" in err[0]
    assert _files_of(teacher) == before


def test_best_export_over_a_data_split_is_refused_and_the_split_kept(tiny_teacher, glue_dir, tmp_path, capsys):
    """`data split --output D`, then `best --export D` deleted the split's files (exit 0): another command's result
    needs --overwrite."""
    from raydistill.commands import best
    from raydistill.data.__main__ import main as data

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _logged_student(uri, tiny_teacher("classification", 2), tmp_path)  # a student best would export
    split = str(tmp_path / "D")
    data(["split", "--task", "sst2", "--data-dir", glue_dir, "--output", split])
    before = _files_of(split)
    assert {"train.jsonl", "validation.jsonl", "dev.jsonl"} <= set(before)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        best.main(["--experiment", "e", "--tracking-uri", uri, "--export", split])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1, err
    assert err[0].startswith(f"error: export: {split} holds a data split written by raydistill data split"), err
    assert "--overwrite" in err[0] and _files_of(split) == before


def test_finetune_never_writes_into_a_users_resume_folder(tiny_teacher, glue_dir, tmp_path, capsys):
    """`finetune --output X` wrote its checkpoints into a user's `X.resume/` (and removed it where its names
    matched)."""
    from raydistill.commands import finetune

    users = _user_folder(tmp_path / "X.resume")
    (tmp_path / "X.resume" / "checkpoint").mkdir()
    before = _files_of(users)
    argv = ["--model", tiny_teacher("base"), "--output", str(tmp_path / "X"), "--task", "sst2", "--data-dir", glue_dir]
    argv += ["--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--max-steps", "2", "--max-length", "16"]
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        finetune.main([*argv, "--overwrite"])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and err[0].startswith(f"error: output: {users} exists"), err
    assert _files_of(users) == before and sorted(os.listdir(users)) == ["checkpoint", USER_FILE]
    assert not os.path.exists(tmp_path / "X") and not os.path.exists(tmp_path / "mlflow.db")
