"""DDP without Ray: torch.multiprocessing + gloo on CPU.

Two workers on padded batches of different lengths compute the loss, gradients and weights one worker computes on
the same global batch; every method hands the world size to each of its global means; ranks draw different dropout
masks; projections exist only where a loss reads them (PKD with a narrow student used to die in DDP's unused-parameter
check).
"""

from __future__ import annotations

import os
import shutil
import socket
from dataclasses import replace

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from raydistill.config.schema import DistillConfig, RunConfig, StudentConfig, TrainConfig
from raydistill.distill import losses as L

KO_LABELS = ("O", "B-PS", "I-PS", "B-LC", "I-LC", "B-OG", "I-OG", "B-DT", "I-DT", "B-TI", "I-TI", "B-QT", "I-QT")


def _spawn(fn, world: int, *args) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(fn, args=(world, port, *args), nprocs=world, join=True)


def _init(rank: int, world: int, port: int) -> None:
    torch.set_num_threads(1)  # two processes on a small CI machine
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)


# ---------------------------------------------------------------- every token-level loss, one step
LENGTHS = (2, 7, 4, 3)  # rank 0 takes examples 0-1 (padded to 7, 9 real tokens), rank 1 examples 2-3 (to 4, 7)
HS, HT, C, A = 4, 6, 5, 2
LOSS_NAMES = (
    "soft_ce",
    "hard_token",
    "mlm",
    "logit_mse",
    "hidden_mse",
    "cosine",
    "attention_mse",
    "qa_logit_mse",
    "hard_qa",
    "relation_kl",
    "relation_kl_query",
    "hard_cls_copies",
    "hard_reg_copies",
)
PER_SEQUENCE = {"relation_kl"}  # a mean per example: equal slices (drop-last) make the per-rank mean the global one


def _examples() -> list[dict]:
    g = torch.Generator().manual_seed(0)
    out = []
    for i, n in enumerate(LENGTHS):
        labels = torch.randint(0, C, (n,), generator=g)
        labels[torch.rand(n, generator=g) < 0.4] = -100
        labels[0] = 1  # at least one labelled token per example
        out.append(
            {
                "x": torch.randn(n, HS, generator=g),
                "t_h": torch.randn(n, HT, generator=g),
                "t_logits": torch.randn(n, C, generator=g),
                "t_scores": torch.randn(A, n, n, generator=g),
                "labels": labels,
                "start_positions": torch.tensor(100 if i == 3 else n - 1),  # 100: ignored
                "end_positions": torch.tensor(n // 2),
                # sequence labels; example 1 is an augmented copy (no gold label): rank 0 has 1 labelled, rank 1 2
                "cls_label": torch.tensor(-100 if i == 1 else i % C),
                "reg_label": torch.tensor(float("nan") if i == 1 else float(i)),
            }
        )
    return out


def _pad(examples: list[dict]) -> dict:
    """A right-padded batch; padded inputs are large garbage, which only a mask keeps out of the losses."""
    T = max(len(e["x"]) for e in examples)
    g = torch.Generator().manual_seed(1)
    b = {"attention_mask": torch.zeros(len(examples), T, dtype=torch.long)}
    for k in ("x", "t_h", "t_logits", "labels"):
        rows = []
        for e in examples:
            v, shape = e[k], (T - len(e[k]), *e[k].shape[1:])
            pad = torch.full(shape, -100) if k == "labels" else 30 * torch.randn(shape, generator=g)
            rows.append(torch.cat([v, pad.to(v.dtype)]))
        b[k] = torch.stack(rows)
    b["t_scores"] = torch.stack(
        [torch.nn.functional.pad(e["t_scores"], (0, T - len(e["x"]), 0, T - len(e["x"]))) for e in examples]
    )
    for i, e in enumerate(examples):
        b["attention_mask"][i, : len(e["x"])] = 1
    for k in ("start_positions", "end_positions", "cls_label", "reg_label"):
        b[k] = torch.stack([e[k] for e in examples])
    return b


class Toy(torch.nn.Module):
    """Student features as functions of parameters, so every loss has a gradient to compare."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(2)
        self.h = torch.nn.Parameter(torch.randn(HS, HS, generator=g))
        self.c = torch.nn.Parameter(torch.randn(HS, C, generator=g))
        self.q = torch.nn.Parameter(torch.randn(A, HS, HS, generator=g))
        self.w = torch.nn.Parameter(torch.randn(HS, HT, generator=g))  # the projection to the teacher width

    def forward(self, b: dict, name: str, world: int = 1):
        x, mask = b["x"], b["attention_mask"]
        h, logits = x @ self.h, x @ self.c
        start, end = logits[..., 0], logits[..., 1]
        scores = torch.einsum("bid,ade,bje->baij", x, self.q, x)
        # a QA head's padding logits pushed out of the softmax (as methods._pos does): the count of gold positions
        # (one ignored example on rank 1) is what hard_qa checks
        q_start, q_end = start.masked_fill(mask == 0, -1e4), end.masked_fill(mask == 0, -1e4)
        return {
            "soft_ce": lambda: L.soft_ce(logits, b["t_logits"], 2.0, mask=mask, world=world),
            "hard_token": lambda: L.hard_loss("token", logits, b, world=world),
            "mlm": lambda: L.mlm_loss(logits, b["labels"], world=world),
            "logit_mse": lambda: L.logit_mse(logits, b["t_logits"], mask=mask, world=world),
            "hidden_mse": lambda: L.hidden_mse(h, b["t_h"], proj=self.w, mask=mask, world=world),
            "cosine": lambda: L.cosine_hidden(h @ self.w, b["t_h"], mask, world=world),
            "attention_mse": lambda: L.attention_mse(scores, b["t_scores"], mask, world=world),
            "qa_logit_mse": lambda: L.qa_logit_mse(
                start, end, b["t_logits"][..., 0], b["t_logits"][..., 1], mask, world=world
            ),
            "hard_qa": lambda: L.hard_loss("qa", (q_start, q_end), b, world=world),
            # widths 4 vs 6, A relation heads
            "relation_kl": lambda: L.relation_kl(h, x, b["t_h"], b["t_h"], A, mask, world=world),
            "relation_kl_query": lambda: L.relation_kl(h, x, b["t_h"], b["t_h"], A, mask, per="query", world=world),
            "hard_cls_copies": lambda: L.hard_loss(
                "classification", logits[:, 0], {"labels": b["cls_label"]}, world=world
            ),
            "hard_reg_copies": lambda: L.hard_loss(
                "regression", logits[:, 0, :1], {"labels": b["reg_label"]}, world=world
            ),
        }[name]()


def _step(model, batch, name, world: int = 1):
    model.zero_grad()
    loss = model(batch, name, world)
    loss.backward()
    return loss.detach(), {
        n: p.grad.clone() if p.grad is not None else torch.zeros_like(p) for n, p in model.named_parameters()
    }


def _loss_worker(rank, world, port, out):
    _init(rank, world, port)
    model = torch.nn.parallel.DistributedDataParallel(Toy(), find_unused_parameters=True)
    batch = _pad(_examples()[2 * rank : 2 * rank + 2])
    res = {}
    for name in LOSS_NAMES:
        loss, grads = _step(model, batch, name, world)
        per_rank = model.module(batch, name).detach()  # a plain per-rank mean, for contrast
        both = torch.stack([loss, per_rank])
        dist.all_reduce(both)
        res[name] = (both / world, {k.removeprefix("module."): v for k, v in grads.items()})
    torch.save(res, os.path.join(out, f"rank{rank}.pt"))
    dist.destroy_process_group()


def test_two_workers_on_padded_batches_match_one_worker_for_every_token_loss(tmp_path):
    ref_model, full = Toy(), _pad(_examples())
    _spawn(_loss_worker, 2, str(tmp_path))
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    for name in LOSS_NAMES:
        loss, grads = _step(ref_model, full, name)
        (mean, per_rank_mean), ddp_grads = ranks[0][name]
        assert mean.item() == pytest.approx(loss.item(), rel=1e-5), name
        for k, g in grads.items():  # DDP averaged the ranks' gradients: both hold the same
            assert torch.allclose(ddp_grads[k], g, rtol=1e-4, atol=1e-6), (name, k)
            assert torch.equal(ddp_grads[k], ranks[1][name][1][k])
        if name not in PER_SEQUENCE:
            assert per_rank_mean.item() != pytest.approx(loss.item(), rel=1e-3), name  # what the global count fixes


def _uneven_worker(rank, world, port, out):
    """Rank 0 holds three sequences, rank 1 one: the per-sequence relation mean still equals one worker's."""
    _init(rank, world, port)
    model = torch.nn.parallel.DistributedDataParallel(Toy(), find_unused_parameters=True)
    batch = _pad(_examples()[:3] if rank == 0 else _examples()[3:])
    loss, grads = _step(model, batch, "relation_kl", world)
    per_rank = model.module(batch, "relation_kl").detach()
    both = torch.stack([loss, per_rank])
    dist.all_reduce(both)
    torch.save(
        (both / world, {k.removeprefix("module."): v for k, v in grads.items()}), os.path.join(out, f"u{rank}.pt")
    )
    dist.destroy_process_group()


def test_per_sequence_relation_mean_is_global_over_uneven_ranks(tmp_path):
    loss, grads = _step(Toy(), _pad(_examples()), "relation_kl")
    _spawn(_uneven_worker, 2, str(tmp_path))
    (mean, per_rank_mean), ddp_grads = torch.load(tmp_path / "u0.pt")
    assert mean.item() == pytest.approx(loss.item(), rel=1e-5)
    assert per_rank_mean.item() != pytest.approx(loss.item(), rel=1e-3)  # 3:1 ranks: the global count matters
    for k, g in grads.items():
        assert torch.allclose(ddp_grads[k], g, rtol=1e-4, atol=1e-6), k


# ---------------------------------------------------------------- the loop on N workers vs one
def _loop_worker(rank, world, port, cfg, out):
    """loop.run on this rank; records the RNG state dropout draws from at the first step and the weights after
    every step, and rank 0's checkpoints."""
    if world > 1:
        _init(rank, world, port)
    from raydistill.train import loop
    from raydistill.train import step as step_mod

    seen = {"rng": None, "weights": []}
    forward, step = step_mod.Distiller.forward, step_mod.optimizer_step

    def probe_forward(self, *a, **kw):
        if seen["rng"] is None:
            seen["rng"] = torch.get_rng_state()
        return forward(self, *a, **kw)

    def probe_step(model, loss, opt, sched):
        step(model, loss, opt, sched)
        seen["weights"].append(torch.cat([p.detach().flatten() for p in model.parameters()]))

    def report(metrics, ckpt):
        reports.append(metrics)
        if ckpt:
            shutil.copytree(ckpt, os.path.join(out, f"w{world}-epoch{metrics['epoch']}"))

    reports = []
    step_mod.Distiller.forward, step_mod.optimizer_step = probe_forward, probe_step
    try:
        loop.run(cfg, loop.Context(rank=rank, world_size=world, report=report))
    finally:
        step_mod.Distiller.forward, step_mod.optimizer_step = forward, step
    torch.save({"reports": reports, **seen}, os.path.join(out, f"w{world}-rank{rank}.pt"))
    if world > 1:
        dist.destroy_process_group()


def _train(cfg, world: int, out) -> list[dict]:
    if world == 1:
        _loop_worker(0, 1, None, cfg, str(out))
    else:
        _spawn(_loop_worker, world, cfg, str(out))
    return [torch.load(out / f"w{world}-rank{r}.pt", weights_only=False) for r in range(world)]


NARROW = StudentConfig(layers=2, hidden=16, intermediate=32, heads=2, init="random")  # the teacher is 32 wide


def _cfg(task, teacher, data_dir, method, **distill):
    return RunConfig(
        task=task,
        teacher=teacher,
        data_dir=data_dir,
        student=NARROW,
        distill=DistillConfig(method=method, **distill),
        train=TrainConfig(
            epochs=2, batch_size=8, max_steps=4, max_length=64, lr=1e-3, eval_limit=16, teacher_bf16=False
        ),
    ).validate()


CASES = [  # (task, kind, method, distill args): every token-level loss family through the loop
    ("klue_ner", "token", "kd", {"alpha": 0.5, "temperature": 2.0}),  # soft KL and hard CE over tokens
    ("sst2", "classification", "tinybert", {"mapping": "uniform", "stage": "intermediate"}),  # emb/hidden/attention
    ("mrpc", "classification", "distilbert", {"alpha": 0.5, "alpha_cos": 1.0}),  # projected cosine over tokens
    ("korquad", "qa", "two_stage", {"stage": "pred"}),  # start/end logit MSE over positions
    ("sst2", "classification", "pkd", {"alpha": 0.5, "beta": 10.0, "mapping": "uniform"}),  # last pair dropped
    ("sst2", "classification", "minilm", {"stage": "intermediate"}),  # Q/K/V relations over real queries and keys
]


@pytest.mark.parametrize("task,kind,method,extra", CASES, ids=[c[2] + "-" + c[0] for c in CASES])
def test_two_workers_train_as_one(task, kind, method, extra, tiny_teacher, glue_dir, korean_dir, tmp_path):
    n = {"classification": 2, "token": len(KO_LABELS), "qa": 2}[kind]
    teacher = tiny_teacher(kind, n, dropout=0.0, **({"label_names": KO_LABELS} if kind == "token" else {}))
    _assert_two_train_as_one(
        _cfg(task, teacher, korean_dir if kind in ("token", "qa") else glue_dir, method, **extra), tmp_path
    )


def test_two_workers_train_as_one_on_length_grouped_batches(tiny_teacher, glue_dir, tmp_path):
    """--group-by-length: each global batch holds rows of similar length and every rank pads only its own slice."""
    cfg = _cfg("mrpc", tiny_teacher("classification", 2, dropout=0.0), glue_dir, "kd", alpha=0.5, temperature=2.0)
    _assert_two_train_as_one(replace(cfg, train=replace(cfg.train, group_by_length=True)), tmp_path)


WORLD_CASES = [  # every method and stage, each with a kind whose losses hold a per-count mean in every stage
    ("sst2", "classification", "finetune", {}),
    ("klue_ner", "token", "kd", {"alpha": 0.5}),
    ("korquad", "qa", "kd", {"alpha": 0.5}),
    ("mrpc", "classification", "distilbert", {"alpha": 0.5, "alpha_cos": 1.0}),
    ("general", "mlm", "distilbert", {"alpha_cos": 1.0}),
    ("sst2", "classification", "pkd", {"alpha": 0.5, "beta": 10.0, "mapping": "uniform"}),
    ("klue_ner", "token", "tinybert", {"mapping": "uniform"}),
    ("korquad", "qa", "two_stage", {"mapping": "uniform"}),
    ("sst2", "classification", "minilm", {"alpha": 0.5}),
]


def _world_batch(tokenizer, kind: str, n: int) -> dict:
    b = dict(tokenizer(["good fine film", "bad", "a dull and slow film"], padding=True, return_tensors="pt"))
    mask = b["attention_mask"]
    if kind == "classification":
        b["labels"] = torch.tensor([1, 0, 0])
    elif kind == "qa":
        b["start_positions"], b["end_positions"] = torch.tensor([1, 0, 2]), torch.tensor([2, 1, 4])
    else:  # token tags, or the masked LM's token ids
        b["labels"] = torch.randint(0, n, mask.shape, generator=torch.Generator().manual_seed(0)).masked_fill(
            mask == 0, -100
        )
    return b


@pytest.mark.parametrize("task,kind,method,extra", WORLD_CASES, ids=[c[2] + "-" + c[0] for c in WORLD_CASES])
def test_every_method_hands_the_world_size_to_every_global_mean(
    task, kind, method, extra, tiny_teacher, glue_dir, korean_dir, monkeypatch
):
    """``Distiller.forward(world=2)`` reaches each per-count mean of every stage: a method that dropped ``world``
    would leave a per-rank mean (~1e-4 off) that the two-worker loop tests catch only for the cases they run."""
    from raydistill.train.objective import build_objective
    from raydistill.train.step import Distiller, teacher_outputs

    seen, mean = [], L._mean

    def spy(total, count, world=1):
        seen.append(world)
        return mean(total, count)  # no process group here: the local mean

    monkeypatch.setattr(L, "_mean", spy)
    n = {"classification": 2, "token": len(KO_LABELS), "qa": 2, "mlm": 0}[kind]
    teacher = tiny_teacher(kind, n, dropout=0.0, **({"label_names": KO_LABELS} if kind == "token" else {}))
    objective, student, t_model, tokenizer = build_objective(
        _cfg(task, teacher, korean_dir if kind in ("token", "qa") else glue_dir, method, **extra)
    )
    model, batch = Distiller(student, objective), _world_batch(tokenizer, kind, n or len(tokenizer))
    for stage in objective.method.stages:
        t_out = teacher_outputs(t_model, None, objective, batch, [0, 1, 2], stage, torch.device("cpu"), "fp32")
        seen.clear()
        model(batch, t_out, stage, world=2)
        assert seen and set(seen) == {2}, (stage, seen)


def _assert_two_train_as_one(cfg, tmp_path) -> None:
    one, (r0, r1) = _train(cfg, 1, tmp_path)[0], _train(cfg, 2, tmp_path)
    assert len(one["weights"]) == len(r0["weights"]) == 4
    for a, b, c in zip(one["weights"], r0["weights"], r1["weights"], strict=True):
        assert torch.equal(b, c)  # DDP keeps the ranks in step
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)  # and they step as one worker on the global batch
    for m1, m2 in zip(one["reports"], r0["reports"], strict=True):
        for k, v in m1.items():
            if k.startswith(("train_", "eval_")) and k != "train_examples_per_s":
                assert m2[k] == pytest.approx(v, rel=1e-5, abs=1e-7), k  # per-rank means: ~1e-4 off


def test_ranks_draw_different_dropout_masks(tiny_teacher, glue_dir, tmp_path):
    cfg = _cfg("sst2", tiny_teacher("classification", 2), glue_dir, "kd", alpha=0.5)  # dropout 0.1
    r0, r1 = _train(cfg, 2, tmp_path)
    masks = []
    with torch.random.fork_rng():
        for r in (r0, r1):
            torch.set_rng_state(r["rng"])
            masks.append(torch.nn.functional.dropout(torch.ones(256), 0.1) == 0)
    assert masks[0].any() and not torch.equal(masks[0], masks[1])
    assert all(
        torch.equal(a, b) for a, b in zip(r0["weights"], r1["weights"], strict=True)
    )  # the weights stay identical


def test_two_workers_stop_together_when_the_run_diverges(tiny_teacher, glue_dir, tmp_path):
    """train.stop_diverged: rank 0 judges (it alone scores) and every rank stops after the same epoch, none left
    waiting in a collective; the loss checks mid-epoch are all-reduced, so a NaN on any rank is every rank's."""
    cfg = _cfg("sst2", tiny_teacher("classification", 2, dropout=0.0), glue_dir, "kd", alpha=0.5, temperature=2.0)
    ranks = _train(replace(cfg, fault="nan:epoch=1"), 2, tmp_path)
    for r in ranks:
        assert len(r["reports"]) == 1, [m.get("diverged") for m in r["reports"]]
        assert r["reports"][0]["diverged"].startswith("diverged: training loss not finite at epoch 1")
