"""The training step's AdamW is PyTorch's fused kernel where the parameters' device has one (CPU, CUDA): the same
updates as the per-tensor AdamW up to float rounding, weight decay on matrices only, warm-up + linear decay."""

from __future__ import annotations

import torch

from raydistill.config.schema import RunConfig, TrainConfig
from raydistill.train import step


def _model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Embedding(50, 16), torch.nn.Linear(16, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 3)
    )


def _train(fused: bool, monkeypatch) -> tuple[torch.optim.Optimizer, list[torch.Tensor]]:
    monkeypatch.setattr(step, "FUSED_ADAMW", fused)
    cfg = RunConfig(task="sst2", teacher="t", train=TrainConfig(lr=1e-2, weight_decay=0.1, warmup_ratio=0.2))
    model = _model()
    opt, sched = step.make_optimizer(cfg, list(model.parameters()), total_steps=5)
    gen = torch.Generator().manual_seed(1)
    for _ in range(5):
        x = torch.randint(0, 50, (8, 4), generator=gen)
        loss = torch.nn.functional.cross_entropy(model(x).mean(1), torch.randint(0, 3, (8,), generator=gen))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return opt, [p.detach().clone() for p in model.parameters()]


def test_cpu_parameters_get_the_fused_kernel_with_decay_on_matrices_only(monkeypatch):
    opt, _ = _train(True, monkeypatch)
    assert opt.defaults["fused"] is True
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and all(p.ndim >= 2 for p in decay["params"])
    assert no_decay["weight_decay"] == 0.0 and all(p.ndim < 2 for p in no_decay["params"])


def test_fused_updates_equal_the_per_tensor_ones(monkeypatch):
    fused_opt, fused = _train(True, monkeypatch)
    plain_opt, plain = _train(False, monkeypatch)
    assert not plain_opt.defaults["fused"]
    assert any(
        not torch.equal(a, b) for a, b in zip(fused, [p.detach() for p in _model().parameters()], strict=True)
    )  # it trained
    for a, b in zip(fused, plain, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # the state a checkpoint saves loads into either kind (resume across the change)
    _train(False, monkeypatch)[0].load_state_dict(fused_opt.state_dict())
