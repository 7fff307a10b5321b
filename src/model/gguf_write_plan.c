/* The tensors of a GGUF file written (gguf_write.h): each row of the family's name table as
 * llama.cpp's converter names, orders, shapes and stores it, and the tensors llama.cpp adds
 * (Llama 3's rope_freqs, Phi-3's rope factors); their storage types, sizes and offsets. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/emb_stored.h"
#include "model/gguf_deepseek.h"
#include "model/gguf_moe.h"
#include "model/gguf_write.h"
#include "nn/ops.h"

typedef hs_gguf_ptensor plan_t;
typedef hs_gguf_plan plan;

static uint32_t storage_type(const char *name, size_t rows, size_t cols, hs_gguf_ftype ft)
{
    size_t n = strlen(name);
    if (rows == 0 || (n >= 12 && !strcmp(name + n - 12, "_norm.weight")) ||
        n < 7 || strcmp(name + n - 7, ".weight") || !strcmp(name, "position_embd.weight") ||
        !strcmp(name, "token_types.weight") || strstr(name, ".ffn_gate_inp")) /* the router */
        return HS_GGML_F32;
    if (ft == HS_GGUF_FTYPE_Q8_0 && (strstr(name, "_exps.") || strstr(name, "_shexp.")))
        return HS_GGML_F16; /* the experts kept F16, as before qwen3moe (read in any ggml type) */
    switch (ft) {
    case HS_GGUF_FTYPE_F16: return HS_GGML_F16;
    case HS_GGUF_FTYPE_BF16: return HS_GGML_BF16;
    case HS_GGUF_FTYPE_Q8_0: return cols % 32 ? HS_GGML_F16 : HS_GGML_Q8_0;
    case HS_GGUF_FTYPE_F32: break;
    }
    return HS_GGML_F32;
}

static uint64_t type_bytes(uint32_t type, uint64_t count)
{
    uint64_t blck = 1, bytes = 4;
    hs_ggml_block(type, &blck, &bytes);
    return count / blck * bytes;
}

static void add(plan *p, const char *name, const float *src, size_t rows, size_t cols,
                size_t ld, int transpose)
{
    if (p->nomem)
        return;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        plan_t *nt = realloc(p->t, cap * sizeof *nt);
        if (!nt) {
            p->nomem = 1;
            return;
        }
        p->t = nt;
        p->cap = cap;
    }
    plan_t *t = &p->t[p->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->src = src;
    t->layer = -1;
    t->rows = rows;
    t->cols = cols;
    t->ld = ld;
    t->transpose = transpose;
    t->type = storage_type(name, rows, cols, p->ftype);
    t->nbytes = type_bytes(t->type, (uint64_t)(rows ? rows : 1) * cols);
}

void hs_gguf_plan_add(plan *p, const char *name, const float *src, int layer, hs_slot slot,
                      size_t off, size_t rows, size_t cols, size_t ld, int transpose, size_t ne2,
                      size_t bstride)
{
    add(p, name, src, rows, cols, ld, transpose);
    if (p->nomem)
        return;
    plan_t *t = &p->t[p->n - 1];
    t->layer = layer;
    t->slot = slot;
    t->off = off;
    t->ne2 = ne2;
    t->bstride = bstride;
    if (ne2 > 0)
        t->nbytes = type_bytes(t->type, (uint64_t)rows * cols * ne2);
}

static void add_vec(plan *p, const char *name, const float *v, size_t n)
{
    add(p, name, v, 0, n, n, 0);
}

/* A normalised (in, out) matrix block written as (out, in): ne = {in, out}. */
static void add_lin(plan *p, const char *name, const float *w, size_t in, size_t out, size_t ld)
{
    add(p, name, w, out, in, ld, 1);
}

typedef struct plan_ctx {
    plan *p;
    const hs_model *m;
    const hs_gguf_write_options *opt;
} plan_ctx;

/* One row of the family's name table: its slot's floats (a Q, K or V block of the fused
 * slot for a part) under its GGUF name. An untied decoder is written; a tied one only as a
 * copy of the token embeddings where the row asks for it (HS_TN_GGUF_COPY: llama.cpp
 * before March 2025 requires GPT-2's output.weight) and opt->no_output_copy is not set
 * (the loader ties a copy again); the rows of the MLM head only with opt->keep_mlm. */
static hs_status plan_row(void *ctx, const hs_tensor_name *e, int layer, hs_error *err)
{
    plan_ctx *pc = ctx;
    const hs_model *m = pc->m;
    if ((e->flags & HS_TN_HEAD) && !(pc->opt->keep_mlm && m->cfg.has_lm_head && m->mlm_w))
        return HS_OK;
    /* a layer's tensors are looked up when written (the weight cache converts them); the
     * embeddings and head kept in their stored type are converted once (emb_stored.h) */
    const float *src = NULL, *wte = NULL;
    hs_status st = hs_model_slot_f32(m, HS_S_TOK_EMB, &wte, err);
    if (st || (layer < 0 && (st = hs_model_slot_f32(m, e->slot, &src, err))))
        return st;
    int copy = src && (e->flags & HS_TN_GGUF_COPY) && !pc->opt->no_output_copy;
    const char *gname = e->gguf;
    if (hs_gguf_deepseek_row(pc->p, m, e, layer, &gname)) /* kv_b's halves, the experts' */
        return HS_OK;
    if ((e->flags & HS_TN_OPTIONAL) && (!src || src == wte) && !copy &&
        !(layer >= 0 && m->cfg.arch->mla_kv_lora > 0)) /* a dense layer's MLP (deepseek) */
        return HS_OK;
    hs_tensor_shape sh = hs_names_shape(&m->cfg, e);
    char nm[64];
    hs_names_format(gname, hs_names_index(&m->cfg, e, layer), nm, sizeof nm); /* T5: per stack */
    for (size_t i = 0; i < pc->p->n; i++) /* one tensor read into two slots (Falcon-7B's norm) */
        if (!strcmp(pc->p->t[i].name, nm))
            return HS_OK;
    size_t rows = (size_t)sh.rows, cols = (size_t)sh.cols, ld = (size_t)sh.ld, off = (size_t)sh.off;
    if (e->slot == HS_S_POS_EMB) { /* from the first row a text uses, as llama.cpp's converter
                                      writes RoBERTa's (the loader reads it from row 0) */
        off += (size_t)m->cfg.arch->pos_offset * cols;
        rows = (size_t)m->cfg.n_ctx;
    }
    src = src ? src + off : NULL;
    if (sh.kind == HS_K_VEC)
        add_vec(pc->p, nm, src, cols);
    else if (sh.kind == HS_K_MAT)
        add_lin(pc->p, nm, src, rows, cols, ld);
    else
        add(pc->p, nm, src, rows, cols, cols, 0);
    if (pc->p->nomem)
        return HS_OK;
    plan_t *t = &pc->p->t[pc->p->n - 1];
    if (layer >= 0) {
        t->layer = layer;
        t->slot = e->slot;
        t->off = off;
    }
    /* llama.cpp's rope turns adjacent pairs: Llama's Q and K rows are permuted (its
     * converter's LlamaModel.permute); Qwen2 and GPT-NeoX run rotate-half as stored */
    if (m->cfg.family == HS_FAMILY_LLAMA && (e->slot == HS_S_QKV_W || e->slot == HS_S_QKV_B) &&
        (e->part == 0 || e->part == 1))
        t->rope_dh = (size_t)m->cfg.d_head;
    /* Llama 3's rope scaling as llama.cpp's converter stores it: a divisor per frequency */
    if (e->slot == HS_S_TOK_EMB && m->cfg.arch->rope_scaling == HS_ROPE_LLAMA3) {
        const hs_arch *a = m->cfg.arch;
        double inv[HS_ROTARY_MAX_DIMS / 2];
        hs_op_rope_freqs(a, inv);
        for (int k = 0; k < a->rotary_dims / 2; k++)
            pc->p->rope_freqs[k] = (float)(pow((double)a->rotary_base, -2.0 * k / a->rotary_dims) / inv[k]);
        add_vec(pc->p, "rope_freqs.weight", pc->p->rope_freqs, (size_t)a->rotary_dims / 2);
    }
    if (e->slot == HS_S_TOK_EMB && m->cfg.arch->rope_scaling == HS_ROPE_LONGROPE) { /* Phi-3's */
        add_vec(pc->p, "rope_factors_long.weight", m->cfg.arch->rope_long,
                (size_t)m->cfg.arch->rotary_dims / 2);
        add_vec(pc->p, "rope_factors_short.weight", m->cfg.arch->rope_short,
                (size_t)m->cfg.arch->rotary_dims / 2);
    }
    return HS_OK;
}

hs_status hs_gguf_plan_build(plan *p, const hs_model *m, const hs_gguf_write_options *opt,
                             hs_error *err)
{
    plan_ctx pc = {p, m, opt};
    hs_status st = hs_names_walk(&m->cfg, plan_row, &pc, err);
    if (st)
        return st;
    if (m->cfg.arch->moe_experts > 0)
        hs_gguf_moe_experts(p, m); /* gguf_moe.c: deepseek2's and qwen3moe's */
    if (p->nomem)
        return hs_fail(err, HS_E_NOMEM, "out of memory planning the gguf tensors");
    uint64_t off = 0;
    for (size_t i = 0; i < p->n; i++) {
        p->t[i].offset = off;
        off += (p->t[i].nbytes + HS_GGUF_ALIGN - 1) / HS_GGUF_ALIGN * HS_GGUF_ALIGN;
    }
    return HS_OK;
}
