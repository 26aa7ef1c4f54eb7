"""A student's model card, written from its run. MLflow's transformers flavour stores a card with every logged model
(model_card.md, model_card_data.yaml) and, when given none, tries to fetch one from the Hugging Face Hub by the model's
name: a local student folder is not on the Hub, so every run logged a warning (and reached for the network)."""

from __future__ import annotations

import json
import os


def student_card(model_dir: str, *, task: str, teacher: str, method: str, pipeline_tag: str, metrics: dict) -> str:
    """The card's text: YAML front matter (what the Hub and MLflow read) and a short description of the student, its
    teacher and recipe, and its scores (``best_*``: the epoch chosen on val, and dev's score of that epoch). The license
    is declared ``unknown``: a student inherits its teacher's and its data's terms, which the run cannot know."""
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    shape = (
        f"{c.get('num_hidden_layers')} layers, hidden {c.get('hidden_size')}, {c.get('num_attention_heads')} "
        f"heads, FFN {c.get('intermediate_size')}"
    )
    scores = [
        f"| {k} | {v:.4f} |" if isinstance(v, float) else f"| {k} | {v} |"
        for k, v in sorted(metrics.items())
        if k.startswith("best_")
    ]
    table = "\n".join(["| metric | value |", "|---|---:|", *scores]) if scores else "No scores were recorded."
    return f"""---
license: unknown
library_name: transformers
pipeline_tag: {pipeline_tag}
tags:
- raydistill
- knowledge-distillation
- {task}
---
# A {c.get("model_type", "transformer")} student for {task}

Distilled by raydistill with `{method}` from the teacher `{teacher}`: {shape}.

{table}

`best_val_*` chose the epoch (the validation split carved from the training rows); `best_eval_*` is the dev set's
score of that same epoch. Its license follows its teacher's and its training data's: check those before use.
"""
