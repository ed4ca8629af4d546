"""τ rules, bits needed and the refusal of too-low precision (spec §1.3–1.4)."""

from __future__ import annotations

import pytest

from embstab.hyperbolic import PrecisionError, embed_combinatorial, tree_from_graph
from embstab.hyperbolic.tau import bits_needed, check_precision, choose_tau, tau_for_bits, tau_for_eps
from _graphs import load_graph as _graph


@pytest.fixture(scope="module")
def smalltree():
    return _graph("smalltree")


@pytest.fixture(scope="module")
def phylo():
    return _graph("phylo_tree")


@pytest.mark.parametrize("delta,eps,tau", [(4, 0.1, 23.77), (16, 0.1, 55.02), (404, 0.1, 126.11),
                                           (16, 1.0, 10.004)])
def test_tau_eps_rule_matches_spec(delta, eps, tau):
    assert tau_for_eps(eps, delta) == pytest.approx(tau, abs=0.006)


@pytest.mark.parametrize("tau,height,bits", [(23.77, 3, 103), (55.02, 30, 2381),
                                             (126.11, 16, 2911)])
def test_bits_needed_table(tau, height, bits):
    assert bits_needed(tau, height) == bits


def test_bits_needed_eps1_column():
    assert bits_needed(tau_for_eps(1.0, 4), 3) == 19
    assert bits_needed(tau_for_eps(1.0, 16), 30) == 433
    assert bits_needed(tau_for_eps(1.0, 404), 16) == 529


def test_bit_budget_rule():
    # phylo_tree from its max-degree node: L = 50, τ(-a -p 256) = 2.741 (spec §1.4)
    assert tau_for_bits(256, 50) == pytest.approx(2.741, abs=5e-4)
    assert tau_for_bits(16384, 50) == pytest.approx(174.7, abs=0.05)


def test_roots_and_heights(smalltree, phylo):
    t = tree_from_graph(smalltree, "max_degree")
    assert (int(t.graph.labels[t.root]), t.max_degree, t.height) == (1, 4, 4.0)
    t0 = tree_from_graph(phylo, 0)
    assert (t0.max_degree, t0.height) == (16, 30.0)
    assert int(phylo.labels[tree_from_graph(phylo).root]) == 308


def test_choose_tau_rejects_two_rules(smalltree):
    with pytest.raises(PrecisionError, match="at most one"):
        choose_tau(tree_from_graph(smalltree), eps=0.1, tau=3.0)


def test_refuses_too_low_precision_with_clear_message(phylo):
    with pytest.raises(PrecisionError, match=r"precision_bits=256 is too low.*at least \d+"):
        embed_combinatorial(phylo, eps=0.1, precision_bits=256)
    with pytest.raises(PrecisionError):
        check_precision(10.0, 30.0, 300)
