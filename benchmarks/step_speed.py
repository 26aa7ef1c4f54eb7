#!/usr/bin/env python
"""Distillation step speed: raydistill's TinyBERT intermediate step vs a naive Hugging Face loop vs TextBrewer.

    python benchmarks/step_speed.py            # 12L-768 teacher -> 4L-312 student, batch 32, length 128
    python benchmarks/step_speed.py --smoke    # tiny models, a few seconds (what the tests run)

Implementations, all doing TinyBERT intermediate distillation (embedding MSE + attention MSE + hidden MSE with a
learned projection, uniform mapping 3,6,9,12) with AdamW, linear warmup and gradient clipping, fp32 student:

  ours       the package's pieces (``build_objective``, ``step.Distiller``, ``step.make_optimizer``,
             ``step.teacher_outputs``, ``step.train_step``), teacher forward under
             ``torch.autocast("cpu", bfloat16)`` when the CPU has AVX512-BF16/AMX
  ours_fp32  the same with an fp32 teacher (``loop.run`` with ``--fp32-teacher``, or on CPUs without native bf16)
  ours_amp   extra: the student forward under bf16 autocast too
  ours_compile extra: ours_amp with the student step (forward + losses) under ``torch.compile`` (inductor)
  naive      teacher and student with ``attn_implementation="eager"``, ``output_hidden_states=True,
             output_attentions=True``; attention MSE on the returned post-softmax probabilities; fp32
  textbrewer ``textbrewer.GeneralDistiller`` with the same matches (hidden_mse with linear proj, attention_mse)

All start from the same teacher weights, student weights and projection weights and see the same batches (full
length, no padding, so the masked and unmasked hidden MSEs of the three libraries agree). Steps are timed
interleaved (A, B, C, D, then D, C, B, A, ...) in one process; the report gives medians and ratios of medians.

Loss check (before training, student in eval mode): ``loss_rel_diff`` = |L(bf16 teacher) - L(fp32 teacher)| / L(fp32)
for our total loss, plus the cosine between the two student gradients; the embedding/hidden terms of naive and
TextBrewer must equal ours (same definitions); their attention term is on probabilities, ours on scores.

Last line: ``RATIO ours/naive=… ours/textbrewer=… loss_rel_diff=…`` (wall-clock examples/s ratios).
"""

from __future__ import annotations

import os
import sys

# Many short OpenMP regions + a shared, oversubscribed CPU = threads spinning at barriers while their sibling is
# descheduled (docs/benchmarks/README.md, Machine). PASSIVE makes waiting threads sleep; set before torch loads.
if "--omp-active" not in sys.argv:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# benchmark the checkout this file is in, not whatever raydistill is installed
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse
import copy
import json
import statistics
import tempfile
import time

import torch
import torch.nn.functional as F
from common import TEXTS, loadavg, machine


# ------------------------------------------------------------------------------------------------ setup
def sizes(smoke: bool) -> dict:
    if smoke:
        return dict(
            t_layers=4, t_hidden=64, t_heads=4, t_inter=128, s_layers=2, s_hidden=32, s_inter=64, batch=4, length=32
        )
    return dict(
        t_layers=12,
        t_hidden=768,
        t_heads=12,
        t_inter=3072,
        s_layers=4,
        s_hidden=312,
        s_inter=1200,
        batch=32,
        length=128,
    )


def make_teacher(root: str, sz: dict) -> str:
    from raydistill.testing import TinyShape, make_tiny_model

    return make_tiny_model(
        os.path.join(root, "teacher"),
        kind="classification",
        texts=TEXTS,
        shape=TinyShape(layers=sz["t_layers"], hidden=sz["t_hidden"], heads=sz["t_heads"], intermediate=sz["t_inter"]),
    )


def make_batches(n: int, vocab: int, sz: dict, seed: int = 0) -> list[dict]:
    """Full-length batches ([CLS] … [SEP], no padding), single segment, random labels."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        ids = torch.randint(5, vocab, (sz["batch"], sz["length"]), generator=g)
        ids[:, 0], ids[:, -1] = 2, 3  # [CLS], [SEP] of raydistill.testing's vocabulary
        out.append(
            {
                "input_ids": ids,
                "attention_mask": torch.ones_like(ids),
                "token_type_ids": torch.zeros_like(ids),
                "labels": torch.randint(0, 2, (sz["batch"],), generator=g),
            }
        )
    return out


def run_config(teacher_dir: str, sz: dict, total_steps: int):
    from raydistill.config.schema import DistillConfig, RunConfig, StudentConfig, TrainConfig

    return RunConfig(
        task="sst2",
        teacher=teacher_dir,
        student=StudentConfig(
            layers=sz["s_layers"], hidden=sz["s_hidden"], intermediate=sz["s_inter"], heads=sz["t_heads"], init="random"
        ),
        distill=DistillConfig(method="tinybert", stage="intermediate", mapping="uniform"),
        train=TrainConfig(batch_size=sz["batch"], max_length=sz["length"], max_steps=total_steps, epochs=1),
    ).validate()


def adamw(cfg, params, total_steps: int):
    """The package's optimizer and schedule (decay on matrices only, linear warmup)."""
    from raydistill.train.step import make_optimizer

    return make_optimizer(cfg, list(params), total_steps)


# ------------------------------------------------------------------------------------------------ implementations
CPU = torch.device("cpu")


class Ours:
    """One step of ``raydistill.train.loop.run`` (the body of its inner loop), optionally with a bf16-autocast
    teacher."""

    def __init__(
        self,
        cfg,
        total_steps: int,
        teacher_bf16: bool,
        seed: int = 0,
        student_bf16: bool = False,
        compile: bool = False,
    ):
        from raydistill.models.encoder import quiet_hf
        from raydistill.train.loop import seed_all
        from raydistill.train.objective import build_objective
        from raydistill.train.step import Distiller

        quiet_hf()
        seed_all(seed)
        self.objective, self.student, self.teacher, _ = build_objective(cfg)
        self.model = Distiller(self.student, self.objective)
        self.model.train()
        if compile:  # the module's parameters stay the student's and projections': one optimizer either way
            self.model = torch.compile(self.model)
        self.stage = self.objective.method.stage_for(0, cfg.train.epochs)
        self.opt, self.sched = adamw(
            cfg, list(self.student.parameters()) + list(self.objective.parameters()), total_steps
        )
        self.teacher_bf16, self.student_bf16 = teacher_bf16, student_bf16
        self.sums: dict = {}

    def _teacher(self, batch):
        from raydistill.train.step import teacher_outputs

        return teacher_outputs(
            self.teacher, None, self.objective, batch, None, self.stage, CPU, "bf16" if self.teacher_bf16 else "fp32"
        )

    def losses(self, batch) -> dict:
        from raydistill.train.precision import autocast

        t_out = self._teacher(batch)
        with autocast(CPU, "bf16" if self.student_bf16 else "fp32"):  # the losses cast to float32 themselves
            return self.model(batch, t_out, self.stage)

    def step(self, batch) -> None:
        from raydistill.train.step import StepOn, train_step

        on = StepOn(CPU, "bf16" if self.student_bf16 else "fp32")
        train_step(self.model, batch, self._teacher(batch), self.stage, self.opt, self.sched, on=on, sums=self.sums)
        # as loop.run runs it

    def projections(self) -> dict:
        return {int(k): v for k, v in self.objective.projections.items()}

    def trainable(self):
        return list(self.student.parameters()) + list(self.objective.parameters())


def _hf_teacher(teacher_dir: str):
    from transformers import AutoModelForSequenceClassification

    return (
        AutoModelForSequenceClassification.from_pretrained(teacher_dir, attn_implementation="eager")
        .eval()
        .requires_grad_(False)
    )


def _eager_copy(student):
    s = copy.deepcopy(student)
    s.set_attn_implementation("eager")
    return s.train()


INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class Naive:
    """What a first Hugging Face distillation loop looks like: ask the models for everything, eager attention."""

    def __init__(self, cfg, total_steps: int, teacher_dir: str, ref: Ours, pairs):
        self.teacher = _hf_teacher(teacher_dir)
        self.student = _eager_copy(ref.student)
        self.pairs = pairs
        self.projs = torch.nn.ModuleDict({str(k): copy.deepcopy(v) for k, v in ref.projections().items()})
        self.opt, self.sched = adamw(cfg, list(self.student.parameters()) + list(self.projs.parameters()), total_steps)
        self.last = 0.0

    def losses(self, batch) -> dict:
        inputs = {k: batch[k] for k in INPUTS}
        with torch.no_grad():
            t = self.teacher(**inputs, output_hidden_states=True, output_attentions=True)
        s = self.student(**inputs, output_hidden_states=True, output_attentions=True)
        p = self.projs
        emb = F.mse_loss(p["0"](s.hidden_states[0]), t.hidden_states[0])
        hid = sum(F.mse_loss(p[str(i)](s.hidden_states[i]), t.hidden_states[j]) for i, j in self.pairs)
        att = sum(F.mse_loss(s.attentions[i - 1], t.attentions[j - 1]) for i, j in self.pairs)
        return {"emb": emb, "att": att, "hidden": hid, "loss": emb + att + hid}

    def step(self, batch) -> None:
        loss = self.losses(batch)["loss"]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(self.student.parameters()) + list(self.projs.parameters()), 1.0)
        self.opt.step()
        self.sched.step()
        self.opt.zero_grad()
        self.last = loss.item()  # the usual per-step logging

    def trainable(self):
        return list(self.student.parameters()) + list(self.projs.parameters())


class TextBrewer:
    """``textbrewer.GeneralDistiller``'s training step (``train_with_num_steps`` body) with TinyBERT matches."""

    def __init__(self, cfg, total_steps: int, teacher_dir: str, ref: Ours, pairs, sz: dict, workdir: str):
        import textbrewer
        from textbrewer import DistillationConfig, GeneralDistiller, TrainingConfig

        self.version = textbrewer.__version__
        self.teacher = _hf_teacher(teacher_dir)
        self.student = _eager_copy(ref.student)
        s_h, t_h = sz["s_hidden"], sz["t_hidden"]
        matches = [
            {
                "layer_T": 0,
                "layer_S": 0,
                "feature": "hidden",
                "loss": "hidden_mse",
                "weight": 1,
                "proj": ["linear", s_h, t_h],
            }
        ]
        matches += [
            {
                "layer_T": j,
                "layer_S": i,
                "feature": "hidden",
                "loss": "hidden_mse",
                "weight": 1,
                "proj": ["linear", s_h, t_h],
            }
            for i, j in pairs
        ]
        matches += [
            {"layer_T": j - 1, "layer_S": i - 1, "feature": "attention", "loss": "attention_mse", "weight": 1}
            for i, j in pairs
        ]
        self.kinds = [
            (
                "emb"
                if m["layer_S"] == 0 and m["feature"] == "hidden"
                else "hidden"
                if m["feature"] == "hidden"
                else "att"
            )
            for m in matches
        ]
        train_config = TrainingConfig(device="cpu", output_dir=os.path.join(workdir, "textbrewer"), log_dir=None)
        distill_config = DistillationConfig(intermediate_matches=matches, kd_loss_weight=0, hard_label_weight=0)

        def adaptor(batch, out):
            return {"hidden": out.hidden_states, "attention": out.attentions, "inputs_mask": batch["attention_mask"]}

        self.d = GeneralDistiller(train_config, distill_config, self.teacher, self.student, adaptor, adaptor)
        src = ref.projections()
        with torch.no_grad():  # same starting projections as ours
            for proj, m in zip(self.d.projs, matches, strict=True):
                if proj is not None:
                    proj.load_state_dict(src[m["layer_S"]].state_dict())
        opt, _ = adamw(cfg, self.student.parameters(), total_steps)
        # TextBrewer adds the projections as extra param groups, then builds the scheduler from the class + args
        from transformers import get_linear_schedule_with_warmup

        self.opt, self.sched, _ = self.d.initialize_training(
            opt,
            get_linear_schedule_with_warmup,
            {"num_warmup_steps": int(cfg.train.warmup_ratio * total_steps), "num_training_steps": max(total_steps, 1)},
            None,
        )
        self.args = {"output_hidden_states": True, "output_attentions": True}
        self.step_no = 0

    def losses(self, batch) -> dict:
        inputs = {k: batch[k] for k in INPUTS}
        total, parts = self.d.train_on_batch(inputs, self.args)
        out = {"emb": 0.0, "att": 0.0, "hidden": 0.0}
        for kind, v in zip(self.kinds, parts.values(), strict=True):
            out[kind] = out[kind] + v
        out["loss"] = total
        return out

    def step(self, batch) -> None:  # textbrewer/distiller_basic.py: BasicDistiller.train_with_num_steps
        inputs = {k: batch[k] for k in INPUTS}
        total_loss, losses_dict = self.d.train_on_batch(inputs, self.args)
        self.d.write_loss(total_loss, self.step_no, losses_dict)
        total_loss /= self.d.t_config.gradient_accumulation_steps
        total_loss.backward()
        torch.nn.utils.clip_grad_norm_(self.d.model_S.parameters(), 1.0)
        self.opt.step()
        self.sched.step()
        self.opt.zero_grad()
        self.step_no += 1

    def trainable(self):
        return list(self.student.parameters()) + [p for pr in self.d.projs if pr is not None for p in pr.parameters()]


# ------------------------------------------------------------------------------------------------ checks and timing
OURS = ("ours", "ours_fp32", "ours_amp", "ours_compile")


def loss_check(impls: dict, batch: dict) -> dict:
    """Losses of every implementation on one batch before training, student in eval mode (no dropout), and the
    cosine between the gradients (student + projections) of each of our variants and ours_fp32."""
    out, grads = {}, {}
    for name, impl in impls.items():
        impl.student.eval()
        losses = impl.losses(batch)
        if name in OURS:
            params = impl.trainable()
            g = torch.autograd.grad(losses["loss"], params, allow_unused=True)
            grads[name] = torch.cat(
                [
                    (x if x is not None else torch.zeros_like(p)).reshape(-1).double()
                    for x, p in zip(g, params, strict=True)
                ]
            )
        out[name] = {k: float(v.detach() if torch.is_tensor(v) else v) for k, v in losses.items()}
        impl.student.train()
        for p in impl.trainable():
            p.grad = None
    for name in ("ours", "ours_amp", "ours_compile"):
        if name in grads and "ours_fp32" in grads:
            out[f"grad_cos_{name}_vs_fp32"] = float(F.cosine_similarity(grads[name], grads["ours_fp32"], dim=0))
    return out


def interleaved(impls: dict, batches: list, warmup: int, steps: int, log=print) -> dict:
    """Time ``step`` of each implementation round by round, alternating the order; returns per-impl lists of
    (wall s, process cpu s) for the timed rounds."""
    names = list(impls)
    times = {n: [] for n in names}
    for r in range(warmup + steps):
        order = names if r % 2 == 0 else names[::-1]
        for n in order:
            batch = batches[r % len(batches)]
            c0, t0 = time.process_time(), time.perf_counter()
            impls[n].step(batch)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            if r >= warmup:
                times[n].append((wall, cpu))
            log(
                f"  round {r + 1}/{warmup + steps}{' (warmup)' if r < warmup else ''} {n}: {wall:.2f} s wall, "
                f"{cpu:.2f} s cpu",
                flush=True,
            )
    return times


def profile(ours: Ours, batch: dict, rounds: int = 2, top: int = 15) -> dict:
    """Where our step's time goes: process CPU seconds of the teacher forward (fp32 and bf16, interleaved), the
    student forward + losses, the backward and the optimizer step; then torch.profiler's top ops of one step."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    def cpu(f):
        c0 = time.process_time()
        r = f()
        return time.process_time() - c0, r

    keep, parts = ours.teacher_bf16, {}
    for r in range(rounds):
        for bf in (True, False) if r % 2 == 0 else (False, True):
            ours.teacher_bf16 = bf
            ct, t_out = cpu(lambda: ours._teacher(batch))
            parts.setdefault(f"teacher_forward_{'bf16' if bf else 'fp32'}", []).append(ct)
            if bf == keep:
                cs, losses = cpu(lambda t_out=t_out: ours.model(batch, t_out, ours.stage))
                cb, _ = cpu(lambda losses=losses: losses["loss"].backward())
                co, _ = cpu(
                    lambda: (
                        torch.nn.utils.clip_grad_norm_(ours.model.parameters(), 1.0),
                        ours.opt.step(),
                        ours.sched.step(),
                        ours.opt.zero_grad(set_to_none=True),
                    )
                )
                for k, v in (("student_forward_and_losses", cs), ("backward", cb), ("clip_and_optimizer", co)):
                    parts.setdefault(k, []).append(v)
    ours.teacher_bf16 = keep
    parts = {k: statistics.median(v) for k, v in parts.items()}
    print(f"profile (process cpu s, median of {rounds}): " + json.dumps({k: round(v, 3) for k, v in parts.items()}))
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        ours.step(batch)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=top), flush=True)
    return parts


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny models, 1 warmup + 1 step (seconds)")
    p.add_argument("--steps", type=int, default=None, help="timed steps per implementation (default 3; smoke 1)")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's own, = cores)")
    p.add_argument(
        "--impls",
        default="ours,ours_fp32,naive,textbrewer",
        help="comma list of ours, ours_fp32, ours_amp (student under bf16 autocast too), ours_compile "
        "(ours_amp + torch.compile of the student step), naive, textbrewer",
    )
    p.add_argument("--profile", action="store_true", help="after timing: where our step's time goes")
    p.add_argument("--omp-active", action="store_true", help="leave OMP_WAIT_POLICY unset (see the top of the file)")
    p.add_argument("--json", help="also write the results here")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    steps = a.steps if a.steps is not None else (1 if a.smoke else 3)
    sz = sizes(a.smoke)
    wanted = [x.strip() for x in a.impls.split(",") if x.strip()]
    info = machine()
    print("machine: " + json.dumps(info), flush=True)
    print("sizes: " + json.dumps(sz), flush=True)
    bf16 = info["bf16_native"]
    if not bf16:
        print("note: no AVX512-BF16/AMX on this CPU: 'ours' keeps an fp32 teacher", flush=True)

    from raydistill.distill.mapping import layer_pairs

    total = a.warmup + steps
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="raydistill-bench-") as root:
        teacher_dir = make_teacher(root, sz)
        cfg = run_config(teacher_dir, sz, total)
        pairs = layer_pairs("uniform", sz["s_layers"], sz["t_layers"])
        impls: dict = {}
        ref = Ours(cfg, total, teacher_bf16=bf16)
        if "ours" in wanted:
            impls["ours"] = ref
        if "ours_fp32" in wanted:
            impls["ours_fp32"] = Ours(cfg, total, teacher_bf16=False)
        if "ours_amp" in wanted:
            impls["ours_amp"] = Ours(cfg, total, teacher_bf16=bf16, student_bf16=bf16)
        if "ours_compile" in wanted:
            impls["ours_compile"] = Ours(cfg, total, teacher_bf16=bf16, student_bf16=bf16, compile=True)
        if "naive" in wanted:
            impls["naive"] = Naive(cfg, total, teacher_dir, ref, pairs)
        skipped = {}
        if "textbrewer" in wanted:
            try:
                impls["textbrewer"] = TextBrewer(cfg, total, teacher_dir, ref, pairs, sz, root)
                print(f"textbrewer {impls['textbrewer'].version}", flush=True)
            except ImportError as e:
                skipped["textbrewer"] = f"not importable: {e} (pip install textbrewer)"
                print(f"note: textbrewer skipped: {skipped['textbrewer']}", flush=True)
        batches = make_batches(total, ref.teacher.config.vocab_size, sz)

        check = loss_check(impls, batches[0])
        print("losses (eval mode, batch 0, before training): " + json.dumps(check), flush=True)
        times = interleaved(impls, batches, a.warmup, steps)
        parts = profile(ref, batches[0]) if a.profile else None
    info["loadavg_end"] = loadavg()
    info["total_s"] = round(time.perf_counter() - t_start, 1)

    b = sz["batch"]
    res = {}
    for n, ts in times.items():
        wall = statistics.median(t for t, _ in ts)
        cpu = statistics.median(c for _, c in ts)
        res[n] = {
            "wall_s_per_step": wall,
            "cpu_s_per_step": cpu,
            "examples_per_s": b / wall,
            "examples_per_cpu_s": b / cpu,
            "wall_all": [round(t, 3) for t, _ in ts],
            "cpu_all": [round(c, 3) for _, c in ts],
        }
    print(f"{'impl':<11} {'ex/s (wall)':>12} {'s/step wall':>12} {'cpu s/step':>11}  all wall s/step")
    for n, r in res.items():
        print(
            f"{n:<11} {r['examples_per_s']:>12.2f} {r['wall_s_per_step']:>12.3f} {r['cpu_s_per_step']:>11.3f}  "
            f"{r['wall_all']}"
        )

    def ratio(x, y, key="examples_per_s"):
        return res[x][key] / res[y][key] if x in res and y in res else float("nan")

    ours = "ours" if "ours" in res else "ours_fp32"
    base = "ours_fp32" if "ours_fp32" in check else "ours"

    def loss_diff(name):
        if name not in check or "ours_fp32" not in check:
            return None, {}
        return (
            rel(check[name]["loss"], check["ours_fp32"]["loss"]),
            {k: rel(check[name][k], check["ours_fp32"][k]) for k in ("emb", "att", "hidden")},
        )

    lrd, comp = loss_diff("ours")
    summary = {
        "ours/naive": ratio(ours, "naive"),
        "ours/textbrewer": ratio(ours, "textbrewer"),
        "ours_fp32/naive": ratio("ours_fp32", "naive"),
        "ours_fp32/textbrewer": ratio("ours_fp32", "textbrewer"),
        "ours/ours_fp32": ratio(ours, "ours_fp32"),
        "cpu_time ours/naive": ratio(ours, "naive", "examples_per_cpu_s"),
        "cpu_time ours/textbrewer": ratio(ours, "textbrewer", "examples_per_cpu_s"),
        "cpu_time ours_fp32/naive": ratio("ours_fp32", "naive", "examples_per_cpu_s"),
        "loss_rel_diff": lrd,
        "loss_rel_diff_components": comp,
        "grad_cos_ours_vs_fp32": check.get("grad_cos_ours_vs_fp32"),
        "emb_hidden_rel_diff_vs_ours_fp32": {
            n: max(rel(check[n][k], check[base][k]) for k in ("emb", "hidden"))
            for n in ("naive", "textbrewer")
            if n in check
        },
    }
    for extra in ("ours_amp", "ours_compile"):
        if extra in res:
            x_lrd, x_comp = loss_diff(extra)
            summary.update(
                {
                    f"{extra}/naive": ratio(extra, "naive"),
                    f"{extra}/textbrewer": ratio(extra, "textbrewer"),
                    f"cpu_time {extra}/naive": ratio(extra, "naive", "examples_per_cpu_s"),
                    f"cpu_time {extra}/textbrewer": ratio(extra, "textbrewer", "examples_per_cpu_s"),
                    f"{extra} loss_rel_diff": x_lrd,
                    f"{extra} loss_rel_diff_components": x_comp,
                    f"grad_cos_{extra}_vs_fp32": check.get(f"grad_cos_{extra}_vs_fp32"),
                }
            )
    print("summary: " + json.dumps(summary), flush=True)
    out = {
        "machine": info,
        "sizes": sz,
        "steps": steps,
        "warmup": a.warmup,
        "results": res,
        "losses": check,
        "summary": summary,
        "profile_cpu_s": parts,
        "skipped": skipped,
    }
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    print(
        f"RATIO ours/naive={summary['ours/naive']:.2f} ours/textbrewer={summary['ours/textbrewer']:.2f} "
        f"loss_rel_diff={lrd if lrd is not None else float('nan'):.2g}",
        flush=True,
    )
    return out


if __name__ == "__main__":
    main()
