/* The work of activation, attribution and path patching, counted as the passes run it
 * (hs_patch_result.passes): floating-point operations of the matrix products (two a
 * multiply-add: the projections, the attention's scores and P V, the MLP, the LM head),
 * over those of one plain forward pass of the pair's tokens with logits at every position.
 * Norms, activations, softmax and copies are not counted (about 1% of a GPT-2 pass). */
#include "importance/patch_internal.h"
#include "model/model_internal.h"

/* Layer l's attention products on n tokens, one copy: every query's scores and P V over
 * the keys it sees. */
static double scores_flops(const hs_model_config *c, int l, int n)
{
    const hs_arch *a = c->arch;
    hs_visibility vis = hs_model_layer_visibility(c, l);
    double pairs = 0;
    for (int i = 0; i < n; i++)
        pairs += hs_vis_hi(vis, i, n) - hs_vis_lo(vis, i);
    double qk = a->mla_kv_lora > 0 ? a->mla_nope + a->rotary_dims : c->d_head; /* a head's */
    return 2.0 * pairs * c->n_head * (qk + c->d_head);
}

/* Layer l's attention on n tokens, one copy: Q, K, V of every row, then the products. */
static double attn_flops(const hs_model_config *c, int l, int n)
{
    return 2.0 * n * (double)c->d_model * hs_qkv_width(c) + scores_flops(c, l, n);
}

/* Layer l's output projection and MLP (or experts) on rows rows, one copy. */
static double post_flops(const hs_model_config *c, int l, int rows)
{
    const hs_arch *a = c->arch;
    double d = c->d_model, r = rows, out = 2.0 * r * hs_model_attn_width(c) * d;
    if (a->moe_experts > 0 && l >= a->moe_first_dense) /* router, chosen and shared experts */
        return out + 2.0 * r * d * a->moe_experts +
               (a->moe_top_k + a->moe_shared) * 6.0 * r * d * a->moe_ff;
    return out + 2.0 * r * d * hs_ff_width(c) + 2.0 * r * c->d_ff * d;
}

double hs_patch_head_flops(const hs_model_config *c, int rows, int cols)
{
    double d = c->d_model, r = rows;
    return (c->arch->head == HS_HEAD_MLM ? 2.0 * r * d * d : 0) + 2.0 * r * d * cols;
}

double hs_patch_forward_flops(const hs_model_config *c, int n)
{
    double f = hs_patch_head_flops(c, n, c->vocab_size);
    for (int l = 0; l < c->n_layer; l++)
        f += attn_flops(c, l, n) + post_flops(c, l, n);
    return f;
}

double hs_patch_pass_flops(const hs_model_config *c, int n, int l0, int batch,
                           hs_patch_start start, int last_rows)
{
    double f = 0;
    for (int l = l0; l < c->n_layer; l++) {
        if (l > l0 || start == HS_PATCH_START_LAYER)
            f += batch * attn_flops(c, l, n);
        else if (start == HS_PATCH_START_SHARED)
            f += attn_flops(c, l, n);
        f += batch * post_flops(c, l, l == c->n_layer - 1 ? last_rows : n);
    }
    return f;
}

double hs_patch_plain_passes(const hs_model_config *c, int n)
{
    return (hs_patch_pass_flops(c, n, 0, 1, HS_PATCH_START_LAYER, n) +
            hs_patch_head_flops(c, 1, c->vocab_size)) /
           hs_patch_forward_flops(c, n);
}

double hs_patch_backward_flops(const hs_model_config *c, int n)
{
    double f = hs_patch_head_flops(c, 1, c->vocab_size);
    for (int l = 0; l < c->n_layer; l++) /* each product's input gradient; attention's two */
        f += attn_flops(c, l, n) + scores_flops(c, l, n) + post_flops(c, l, n);
    return f;
}
