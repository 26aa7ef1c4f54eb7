"""Assemble one run's pieces: frozen teacher, student, method, learned projections and feature captures."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from raydistill.distill.mapping import layer_pairs
from raydistill.distill.methods import get_method
from raydistill.models.encoder import load_model
from raydistill.models.features import AttentionCapture
from raydistill.models.packing import prepare
from raydistill.models.student import build_student, name_labels


class Objective(torch.nn.Module):
    """The method plus its learnable parts: when the student is narrower than the teacher, one linear projection
    per student layer the method's losses project (TinyBERT's W_h; W_e for the embeddings), and no other."""

    def __init__(self, method, student, teacher):
        super().__init__()
        self.method = method
        s_h, t_h = student.config.hidden_size, teacher.config.hidden_size if teacher is not None else 0
        layers = (
            method.projected_layers(student.config.num_hidden_layers) if teacher is not None and s_h != t_h else set()
        )
        self.projections = torch.nn.ModuleDict({str(i): torch.nn.Linear(s_h, t_h) for i in sorted(layers)})
        self._captures = {}
        self.unpadded = False  # forwards without captures on real tokens only (``use_layout``)
        self._models = {"student": student, "teacher": teacher}

    def proj(self, layer: int):
        return self.projections[str(layer)] if str(layer) in self.projections else None

    def project(self, layer: int, h):
        p = self.proj(layer)
        return p(h) if p is not None else h

    def _capture(self, who: str, stage: str):
        needs = self.method.needs(stage)
        layers, qkv = (
            (needs.teacher_att, needs.teacher_qkv) if who == "teacher" else (needs.student_att, needs.student_qkv)
        )
        if not layers and not qkv:
            return None
        key = (who, layers, qkv)
        if key not in self._captures:
            self._captures[key] = AttentionCapture(self._models[who], set(layers), set(qkv))
        return self._captures[key]

    def use_layout(self, attention: str) -> None:
        """``train.attention``: "unpadded" readies student and teacher for packed forwards (``models.packing``)."""
        self.unpadded = attention == "unpadded"
        if self.unpadded:
            for model in self._models.values():
                if model is not None:
                    prepare(model)

    def teacher_capture(self, stage: str):
        return self._capture("teacher", stage)

    def student_capture(self, stage: str):
        return self._capture("student", stage)


def task_kind(cfg) -> tuple[str, int | None, tuple]:
    from raydistill.config.schema import task_of

    task = task_of(cfg)
    return task.kind, task.num_labels if task.labelled else None, task.label_names


def prune_examples(cfg, tokenizer, batch_size: int = 16):
    """For init ``prune``: sample size (None = the default) → batches of model inputs of that many of the run's
    training rows (``examples.prune_rows``), tokenised as the run tokenises them."""

    def batches(n: int | None) -> list[dict]:
        from raydistill.config.schema import task_of
        from raydistill.data.splits import prune_rows
        from raydistill.tasks.encode import MODEL_INPUTS, collate, encode

        task = task_of(cfg)
        rows, length = prune_rows(cfg, task, n), cfg.train.max_length
        encoded: Sequence[dict]
        if task.kind == "mlm":  # raw text: the teacher reads it unmasked
            encoded = [dict(tokenizer(r["text"], truncation=True, max_length=length)) for r in rows]
        else:
            encoded = encode(task, rows, tokenizer, length).features
        feats = [{k: f[k] for k in MODEL_INPUTS if k in f} for f in encoded]
        return [
            collate(feats[i : i + batch_size], tokenizer.pad_token_id or 0) for i in range(0, len(feats), batch_size)
        ]

    return batches


def _reattach_plan(student, folder: str) -> None:
    """A resumed pruned student keeps its ``prune_plan`` (prune.json beside its weights), so later checkpoints do."""
    import json
    import os

    from raydistill.models.prune import PLAN_FILE

    path = os.path.join(folder, PLAN_FILE)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            student.prune_plan = json.load(f)


def build_objective(cfg, resume_student: str | None = None):
    """Returns (objective, student, teacher or None, tokenizer)."""
    from transformers import AutoTokenizer

    kind, num_labels, label_names = task_kind(cfg)
    method_cls = get_method(cfg.distill.method)
    pretrained_init = cfg.student.init == "pretrained"
    teacher = None
    if method_cls.uses_teacher or not pretrained_init:
        teacher = load_model(cfg.teacher, kind, num_labels=num_labels if pretrained_init else None)
        teacher.eval().requires_grad_(False)
    if resume_student:
        student = load_model(resume_student, kind)
        _reattach_plan(student, resume_student)
    elif pretrained_init:  # fine-tune the model itself (teacher fine-tuning, or a pretrained student)
        student = load_model(cfg.teacher, kind, num_labels=num_labels)
        if label_names and kind in ("classification", "token"):
            student.config.id2label = dict(enumerate(label_names))
            student.config.label2id = {v: i for i, v in enumerate(label_names)}
    tokenizer = AutoTokenizer.from_pretrained(cfg.teacher)
    if not resume_student and not pretrained_init:
        student = build_student(teacher, cfg.student, examples=prune_examples(cfg, tokenizer))
    if kind in ("classification", "token"):  # a placeholder-named teacher's copy answers with the run's names
        name_labels(student.config, label_names)
    pairs = []
    if method_cls.maps_layers:
        assert teacher is not None  # a method that maps layers distils from a teacher (loaded above)
        pairs = layer_pairs(cfg.distill.mapping, student.config.num_hidden_layers, teacher.config.num_hidden_layers)
    layers = (0, 0)
    if method_cls.uses_teacher:
        assert teacher is not None  # loaded above for a method that uses it
        sc, tc = student.config, teacher.config
        method_cls.check_shapes(
            cfg, sc.num_attention_heads, sc.hidden_size, tc.num_attention_heads, tc.hidden_size, tc.num_hidden_layers
        )
        layers = (sc.num_hidden_layers, tc.num_hidden_layers)
    method = method_cls(cfg, kind, pairs, layers)
    if not method_cls.uses_teacher:
        teacher = None
    objective = Objective(method, student, teacher)
    objective.use_layout(cfg.train.attention)
    return objective, student, teacher, tokenizer
