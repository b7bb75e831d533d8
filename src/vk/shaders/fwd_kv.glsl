// SPDX-License-Identifier: MIT
// The step's rows and KV page tables in InBuf (written by src/model/backend_vk.c each step):
//   rows_off + 2 r:      position of row r, its sequence index
//   views_off + 8 v:     view v = seq * n_layer + layer: first page-table entry (uint index into
//                        InBuf), n_blocks, block_size, page_words, row_words, k_off_words,
//                        v_off_words, 0
// KV is the device mirror of the host pool: the same pages at the same byte offsets, f32 rows.
// Word of element i of the K (or V) row at position pos: page * page_words + (k|v)_off_words +
// (pos % block_size) * row_words + i, as backend_cpu.c's kv_page / kv_head address the host.
layout(std430, set = 0, binding = 3) readonly buffer InBuf { uint inb[]; };

// vb: uint index of the view's record in InBuf
uint kv_row(uint vb, uint pos, bool is_v)
{
    uint bs = inb[vb + 2u];
    uint page = inb[inb[vb] + pos / bs];
    return page * inb[vb + 3u] + inb[vb + (is_v ? 6u : 5u)] + (pos % bs) * inb[vb + 4u];
}
