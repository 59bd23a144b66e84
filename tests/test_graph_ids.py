"""The one node-id minter: ids by module, op and phase, counted per (phase, module, op)."""

from __future__ import annotations

from ascend_tui.graph.ids import IdMinter, node_id


def test_minted_ids_count_per_module_op_and_phase() -> None:
    m = IdMinter()
    minted = [m.mint("blocks.0.attn", "bmm"), m.mint("blocks.0.attn", "bmm"), m.mint("", "add"), m.mint("", "add"),
              m.mint("blocks.0.attn", "add"), m.mint("fc", "mm", "backward"), m.mint("", "mm", "backward"),
              m.mint("fc", "mm"), m.mint("fc", "mm", "backward")]
    assert minted == ["blocks.0.attn/bmm.0", "blocks.0.attn/bmm.1", "add.0", "add.1", "blocks.0.attn/add.0",
                      "backward:fc/mm.0", "backward:mm.0", "fc/mm.0", "backward:fc/mm.1"]
    assert m.peek("blocks.0.attn", "bmm") == 2 and m.peek("fc", "mm", "backward") == 2 and m.peek("x", "y") == 0
    assert all(node_id(mod, op, 0, phase) == IdMinter().mint(mod, op, phase)
               for mod in ("", "enc", "enc.inner") for op in ("add", "mm") for phase in ("forward", "backward"))


def test_minting_a_batch_gives_the_ids_and_counts_of_minting_one_at_a_time() -> None:
    modules = ["enc", "", "enc", "enc.inner", "", "enc"]
    ops = ["mm", "add", "mm", "mm", "add", "add"]
    one, batch = IdMinter(), IdMinter()
    one.mint("enc", "mm", "backward")
    batch.mint("enc", "mm", "backward")
    assert batch.mint_all(modules, ops) == [one.mint(m, o) for m, o in zip(modules, ops)] == [
        "enc/mm.0", "add.0", "enc/mm.1", "enc.inner/mm.0", "add.1", "enc/add.0"]
    assert batch.mint("enc", "mm") == one.mint("enc", "mm") == "enc/mm.2"
    assert batch.peek("enc", "mm", "backward") == 1 and batch.mint_all([], []) == []
