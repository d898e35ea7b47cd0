"""Workloads: seeded, the right rates and shapes, every request fits the model's context."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from splitlab.serving import WORKLOADS, gamma_arrivals, make_workload, poisson_arrivals
from splitlab.serving.workload import Fixed, LogNormal, Uniform, WorkloadSpec


def test_same_seed_same_workload_other_seed_other_workload():
    a = make_workload("chat", 20, 5.0, seed=3)
    b = make_workload("chat", 20, 5.0, seed=3)
    c = make_workload("chat", 20, 5.0, seed=4)
    key = lambda ws: [(r.arrival_s, r.prompt, r.max_new_tokens) for r in ws]  # noqa: E731
    assert key(a) == key(b) and key(a) != key(c)
    assert [r.id for r in a] == list(range(20))


def test_poisson_and_gamma_rates_and_burstiness():
    gaps = np.diff(poisson_arrivals(20000, 4.0, seed=1), prepend=0.0)
    assert gaps.mean() == pytest.approx(0.25, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)
    bursty = np.diff(gamma_arrivals(20000, 4.0, cv=3.0, seed=1), prepend=0.0)
    assert bursty.mean() == pytest.approx(0.25, rel=0.1)
    assert bursty.std() / bursty.mean() == pytest.approx(3.0, rel=0.1)
    assert np.all(np.diff(poisson_arrivals(100, 1.0)) >= 0)
    with pytest.raises(ValueError):
        poisson_arrivals(5, 0.0)
    with pytest.raises(ValueError):
        gamma_arrivals(5, 1.0, cv=0)


def test_length_distributions_stay_in_range():
    rng = np.random.default_rng(0)
    assert set(Fixed(7).sample(5, rng)) == {7}
    u = Uniform(10, 20).sample(1000, rng)
    assert u.min() >= 10 and u.max() <= 20 and len(set(u)) == 11
    ln = LogNormal(100, 1.0, 30, 300).sample(2000, rng)
    assert ln.min() >= 30 and ln.max() <= 300 and 80 <= np.median(ln) <= 120


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_named_workloads_have_their_shape_and_fit_the_cpu_context(name):
    reqs = make_workload(name, 40, 2.0, seed=0)
    prompts = np.array([r.prompt_len for r in reqs])
    outputs = np.array([r.max_new_tokens for r in reqs])
    assert all(r.max_total_tokens <= 2048 for r in reqs)
    assert all(0 <= t < 256 for r in reqs for t in r.prompt)
    expected = {"chat": (100, 400, 32, 96), "research": (600, 1000, 16, 48), "summarize": (1000, 1500, 16, 32),
                "code": (30, 80, 100, 150)}[name]
    assert expected[0] <= np.median(prompts) <= expected[1]
    assert expected[2] <= np.median(outputs) <= expected[3]


def test_sizes_scale_with_the_model_context_and_are_clipped_to_it():
    big = SimpleNamespace(max_context=8192, vocab_size=49152)
    small = SimpleNamespace(max_context=512, vocab_size=100)
    base = np.median([r.prompt_len for r in make_workload("summarize", 30, 1.0, model=None)])
    scaled = np.median([r.prompt_len for r in make_workload("summarize", 30, 1.0, model=big)])
    assert scaled == pytest.approx(4 * base, rel=0.1)
    tiny = make_workload("summarize", 30, 1.0, model=small)
    assert all(r.max_total_tokens <= 512 for r in tiny) and all(max(r.prompt) < 100 for r in tiny)


def test_custom_spec_bursty_arrivals_and_errors():
    spec = WorkloadSpec("mine", Fixed(10), Fixed(3))
    reqs = make_workload(spec, 5, 1.0, arrival="gamma", cv=2.0)
    assert [(r.prompt_len, r.max_new_tokens) for r in reqs] == [(10, 3)] * 5
    with pytest.raises(KeyError, match="chat"):
        make_workload("nope", 1, 1.0)
    with pytest.raises(ValueError):
        make_workload("chat", 1, 1.0, arrival="weibull")
