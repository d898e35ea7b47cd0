"""How hard a slow KV link is (splitlab.teach.figures.map_steady_link, issue 22): a slow link's cell set beside a
datasheet case in prefills of the prompt, the words following the numbers (harsher, gentler, within), and bad input
refused naming it."""
from __future__ import annotations

import dataclasses
import re

import pytest

from splitlab.costmodel import CostModel, roofline_cost_model
from splitlab.sizing import LINKS
from splitlab.teach.figures import map_steady_link, map_steady_sizes
from splitlab.teach.figures.style import fmt2
from test_map_steady import _steady
from test_pools_live import NAMES

H100 = roofline_cost_model("Llama-3-8B", "H100", "bf16")


def _far(kv_bytes_per_token=2048, link=0.01):
    c = _steady("chunked", NAMES["chunked"], NAMES["split"], link=link)
    c.extra["cost"] = dataclasses.asdict(CostModel(kv_bytes_per_token=kv_bytes_per_token))
    return c


def _there(tokens, link="25 Gb/s network"):
    over = H100.over_link(link)
    return [over.transfer_s(p * H100.kv_bytes_per_token) / H100.prefill_s(p) for p in tokens]


@pytest.mark.parametrize("kv, side", [(2048 * 50, "harsher than"), (2, "gentler than")])
def test_scale_words_set_the_cells_link_in_prefills_beside_the_datasheet_case(kv, side):
    c = _far(kv)
    cost = CostModel(kv_bytes_per_token=kv)
    here = c.prompt_tokens * kv / 1e7 / cost.prefill_s(c.prompt_tokens)  # over 0.01 GB/s, in prefills of its prompt
    there = _there((2048, 8192))
    assert (here > max(there)) == (side == "harsher than") and (here < min(there)) == (side != "harsher than")
    said = map_steady_link.scale_words(c, H100, "Llama-3-8B on an H100", "25 Gb/s network")
    assert said.startswith(f" For scale: over the 0.01 GB/s link one request's cache ({c.prompt_tokens} prompt "
                           f"tokens) takes {fmt2(here)} times as long to move as its prompt takes to prefill; ")
    assert said.endswith(f"this link is {side} a 25 Gb/s network{', itself link-bound' if min(there) > 1 else ''}.")
    assert f"Llama-3-8B on an H100, at 2,048 or 8,192 tokens, takes {fmt2(there[0])} or {fmt2(there[1])} times its " \
           f"prefill over a 25 Gb/s network (the analytic model" in said
    two = map_steady_link.scale_words(c, H100, "Llama-3-8B on an H100", ("25 Gb/s network", "400 Gb/s network"))
    fast = _there((2048, 8192), "400 Gb/s network")
    assert f"over a 25 Gb/s network and {fmt2(fast[0])} or {fmt2(fast[1])} times over a 400 Gb/s network" in two
    assert two.endswith(said[said.index("(the analytic model"):])  # judged against the first link
    assert map_steady_sizes.moved_words is map_steady_link.moved_words  # one arithmetic, kept where it was read


def test_scale_words_say_within_where_the_cell_lies_between_the_cases():
    """A datasheet cost whose fixed prefill cost makes a short prompt's transfer cheap in prefills and a long one's
    dear: a cell's link in between is neither harsher nor gentler."""
    gpu = CostModel(kv_bytes_per_token=1_000_000, prefill_base_s=0.05)  # 1 MB a token over 3.125 GB/s
    over = gpu.over_link("25 Gb/s network")
    lo, hi = (over.transfer_s(p * 1_000_000) / gpu.prefill_s(p) for p in (16, 8192))
    c = _far()
    here = c.prompt_tokens * 2048 / 1e7 / CostModel(kv_bytes_per_token=2048).prefill_s(c.prompt_tokens)
    assert lo < here < hi, (lo, here, hi)
    said = map_steady_link.scale_words(c, gpu, "a made-up GPU", "25 Gb/s network", prompt_tokens=(16, 8192))
    assert f"takes {fmt2(here)} times as long" in said and f"takes {fmt2(lo)} or {fmt2(hi)} times its prefill" in said
    assert said.endswith("this link is within the range of a 25 Gb/s network.")


def test_scale_words_say_nothing_on_the_own_link_and_refuse_bad_input():
    assert map_steady_link.scale_words(_far(link=None), H100, "x", "25 Gb/s network") == ""
    for kw, match in ((dict(link="bogus"), "link must be distinct names of"),
                      (dict(prompt_tokens=(0,)), "whole numbers in 1"),
                      (dict(prompt_tokens=[]), "whole numbers in 1"), (dict(prompt_tokens=(True,)), "whole numbers"),
                      (dict(prompt_tokens=2048), "whole numbers in 1"), (dict(cost="H100"), "must be a CostModel"),
                      (dict(prompt_tokens=(10**400,)), "whole numbers in 1 .. 10,000,000"),  # an OverflowError
                      (dict(prompt_tokens=(2048, 2048)), "distinct"),  # "2,048 or 2,048 tokens in 1.5 or 1.5"
                      (dict(name=None), "name must be the datasheet case"),  # "None over a 25 Gb/s network"
                      (dict(link=["x"]), "link must be distinct names of"),
                      (dict(link=("25 Gb/s network",) * 2), "distinct names"), (dict(link=3), "distinct names"),
                      (dict(c=None), "c must be a SteadyCell")):
        args = dict(c=_far(), cost=H100, name="Llama-3-8B on an H100", link="25 Gb/s network") | kw
        with pytest.raises(ValueError, match=match):
            map_steady_link.scale_words(**args)
    for link in (1e-320, 1e300):  # "in inf: harsher than that"; a bandwidth overflowed to inf
        with pytest.raises(ValueError, match=re.escape(f"link_gbps of {link!r} moves its ") + ".* not a link this"):
            map_steady_link.scale_words(_far(link=link), H100, "x", "25 Gb/s network")
    text = _far()
    text.extra["cost"]["prefill_base_s"] = "0.1"  # a TypeError deep in the arithmetic
    with pytest.raises(ValueError, match=r"moved_words: .* fields \['prefill_base_s'\] must be finite numbers"):
        map_steady_link.moved_words(text)
    import numpy as np
    assert ", at 1 token, takes " in map_steady_link.scale_words(_far(), H100, "x", "25 Gb/s network", [1])
    assert ", at 2,048 tokens, takes " in map_steady_link.scale_words(_far(), H100, "x", "25 Gb/s network",
                                                                     [np.int64(2048)])
    with pytest.raises(ValueError, match="scale_words: the 'chunked' cell's link_gbps"):
        map_steady_link.scale_words(_far(link=0.0), H100, "x", "25 Gb/s network")


def test_scale_words_compare_the_numbers_as_printed():
    """A datasheet case 1% dearer than the cell prints the same 2 significant digits: not "gentler" beside two equal
    numbers."""
    c = _far()
    here = c.prompt_tokens * 2048 / 1e7 / CostModel(kv_bytes_per_token=2048).prefill_s(c.prompt_tokens)
    base = CostModel().over_link("25 Gb/s network")
    p = 4096
    kv = (1.01 * here * base.prefill_s(p) - base.transfer_base_s) * 3.125e9 / p  # its transfer 1.01 x here prefills
    gpu = CostModel(kv_bytes_per_token=kv)
    there = gpu.over_link("25 Gb/s network").transfer_s(p * kv) / gpu.prefill_s(p)
    assert there > here and fmt2(there) == fmt2(here)
    said = map_steady_link.scale_words(c, gpu, "a made-up GPU", "25 Gb/s network", prompt_tokens=(p,))
    assert said.endswith("this link is as harsh as a 25 Gb/s network, itself link-bound.")  # 2.4 prefills: > 1
    assert f"takes {fmt2(here)} times" in said
    said = map_steady_link.scale_words(c, gpu, "a made-up GPU", "25 Gb/s network", prompt_tokens=(16, p))
    assert said.endswith("this link is within the range of a 25 Gb/s network.")  # printed equal to the dearer end
