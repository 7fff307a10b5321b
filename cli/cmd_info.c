/* headscope info: describe a model. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gguf_info.h"
#include "model/model_internal.h"

static const char usage_text[] =
    "usage: headscope info MODEL\n\n"
    "Prints the model family, dimensions, parameter count, tokenizer and file format of MODEL\n"
    "(Hugging Face folder or GGUF file). For a GGUF file it then lists the header, every\n"
    "metadata key with its type and value (arrays shortened) and the tensor table.\n\n"
    "  -h, --help   show this help\n";

/* Qwen3-MoE's experts' line: the layers that have them (decoder_sparse_step,
 * mlp_only_layers) listed. */
static void print_moe_layers(const hs_model_config *c)
{
    const hs_arch *a = c->arch;
    printf("experts:      %d routed (%d a token, softmax%s), %d wide, in layer", a->moe_experts,
           a->moe_top_k, a->moe_norm_topk ? ", renormalised" : "", a->moe_ff);
    int first = 1;
    for (int l = 0; l < c->n_layer; l++)
        if (hs_moe_layer(c, l)) {
            printf("%s %d", first ? "s" : ",", l);
            first = 0;
        }
    printf("%s\n", first ? "s: none" : "");
}

/* Under --weight-memory stored: the token embeddings and the LM head stay in their stored
 * type too, where it is not F32 (src/model/emb_stored.h). A GGUF file's own types (g); a
 * folder's checkpoint type (g NULL). */
static void print_tables(const hs_model *m, const hs_gguf *g)
{
    char emb[32] = "", head[32] = "";
    if (!g) {
        printf("tables:       token embeddings and LM head kept in their stored type (%s) "
               "where it is not F32, rows decoded where read\n", hs_model_storage_dtype(m));
        return;
    }
    if (gguf_table_types(g, emb, head, sizeof emb) != 0)
        return;
    int emb_kept = strcmp(emb, "F32") != 0, head_kept = *head && strcmp(head, "F32") != 0;
    if (!emb_kept && !head_kept && *head)
        return;
    printf("tables:       token embeddings %s%s, LM head %s%s%s\n", emb,
           emb_kept ? " (kept stored)" : "", *head ? head : "tied to them",
           head_kept ? " (kept stored)" : "",
           emb_kept || head_kept ? ": rows decoded where read" : "");
}

/* The model and format lines; vocab_only: a GGUF file without tensors. */
static void print_format(const hs_model *m, int vocab_only)
{
    printf("model:        %s\n", cli_shown(hs_model_path(m)));
    const char *wf = hs_model_weights_file(m);
    if (vocab_only)
        printf("format:       GGUF, vocabulary only (no tensors)\n");
    else
        printf("format:       %s%s%s, weights stored as %s\n",
               hs_model_format(m) == HS_FORMAT_GGUF ? "GGUF" : "Hugging Face folder (",
               wf && hs_model_format(m) != HS_FORMAT_GGUF ? cli_shown(wf) : "",
               hs_model_format(m) == HS_FORMAT_GGUF ? "" : ")", hs_model_storage_dtype(m));
}

/* The family line, then the sliding window's, the global layers', the norms', the softcaps'
 * and the scales' lines where the architecture has them. */
static void print_family(const hs_model_config *cfg)
{
    const hs_arch *ar = cfg->arch;
    printf("family:       %s (%s, %s-%s, %s%s%s)\n", ar->name,
           ar->enc_dec ? "encoder-decoder" : cfg->causal ? "causal" : "bidirectional", ar->norm_place == HS_NORM_PRE ? "pre" : "post",
           ar->norm_kind == HS_NORM_RMS ? "RMSNorm" : "LN", cfg->gated ? "gated " : "",
           cfg->act == HS_ACT_SILU       ? "SiLU"
           : cfg->act == HS_ACT_RELU     ? "ReLU"
           : cfg->act == HS_ACT_GELU_ERF ? "gelu erf"
                                         : "gelu tanh",
           ar->parallel_residual ? ", parallel residual" : "");
    if (ar->sliding_window > 0)
        printf("attention:    a sliding window of %d keys on %s\n", ar->sliding_window,
               ar->global_every > 0 ? "the local layers" : "every layer");
    if (ar->sliding_window > 0 && ar->global_every > 0) { /* the global layers, the rest local */
        int k = 0;
        printf("global:       layer");
        for (int l = 0; l < cfg->n_layer; l++)
            if (!hs_model_layer_is_local(cfg, l))
                printf("%s %d", k++ ? "," : "", l);
        printf(k ? " (the others local)\n" : "s: none (every layer local)\n");
    }
    if (ar->qk_norm || ar->post_norms || ar->norm_offset != 0) {
        const char *part[4];
        int np = 0;
        if (ar->qk_norm)
            part[np++] = ar->qk_norm == HS_QK_NORM_HEAD ? "queries and keys per head"
                                                        : "queries and keys over the projection";
        if (ar->no_pre_norm)
            part[np++] = "none before the sublayers";
        if (ar->post_norms)
            part[np++] = "on the attention and MLP outputs";
        if (ar->norm_offset != 0)
            part[np++] = "weights 1 + w";
        printf("norms:       ");
        for (int i = 0; i < np; i++)
            printf("%s %s", i ? ";" : "", part[i]);
        printf("\n");
    }
    if (ar->attn_softcap > 0 || ar->final_softcap > 0)
        printf("softcap:      attention %g, final logits %g (0: none)\n", (double)ar->attn_softcap,
               (double)ar->final_softcap);
    if (ar->query_scale > 0 || ar->emb_scale > 0)
        printf("scales:       scores x %g, embeddings x %g\n", (double)ar->query_scale,
               (double)ar->emb_scale);
}

/* The layers' and heads' lines, latent attention's, the positions' and the experts'. */
static void print_heads(const hs_model_config *cfg)
{
    const hs_arch *ar = cfg->arch;
    if (cfg->n_enc_layer)
        printf("layers:       %d (encoder %d, decoder %d with cross-attention)\n", cfg->n_layer,
               cfg->n_enc_layer, cfg->n_layer - cfg->n_enc_layer);
    else
        printf("layers:       %d\n", cfg->n_layer);
    printf("heads:        %d per layer (d_head %d), %d in all\n", cfg->n_head, cfg->d_head,
           cfg->n_layer * cfg->n_head);
    if (cfg->n_enc_layer)
        printf("cross heads:  %d per decoder layer, %d in all\n", cfg->n_head,
               (cfg->n_layer - cfg->n_enc_layer) * cfg->n_head);
    if (cfg->n_kv_head != cfg->n_head)
        printf("kv heads:     %d per layer, each read by %d query heads\n", cfg->n_kv_head,
               cfg->n_head / cfg->n_kv_head);
    if (ar->mla_kv_lora > 0)
        printf("attention:    latent (kv_lora %d, q_lora %d): q/k heads %d wide (%d rotary, "
               "the rotary key shared), v heads %d\n", ar->mla_kv_lora, ar->mla_q_lora,
               ar->mla_nope + ar->rotary_dims, ar->rotary_dims, cfg->d_head);
    if (ar->pos == HS_POS_ROTARY && ar->rope_scaling == HS_ROPE_LONGROPE)
        printf("positions:    rotary on %d of %d dims, base %g, longrope scaling (long factors "
               "past %d tokens, cos and sin x %g)\n", ar->rotary_dims, cfg->d_head,
               (double)ar->rotary_base, ar->rope_orig_ctx, (double)ar->rope_attn_factor);
    else if (ar->pos == HS_POS_ROTARY)
        printf("positions:    rotary on %d of %d dims, base %g%s\n", ar->rotary_dims,
               ar->mla_kv_lora > 0 ? ar->mla_nope + ar->rotary_dims : cfg->d_head,
               (double)ar->rotary_base,
               ar->rope_scaling == HS_ROPE_LLAMA3 ? ", llama3 scaling" :
               ar->rope_scaling == HS_ROPE_LINEAR ? ", linear scaling" :
               ar->rope_scaling == HS_ROPE_YARN ? ", yarn scaling" : "");
    if (ar->pos == HS_POS_ROTARY && ar->local_rotary_base > 0 && ar->sliding_window > 0)
        printf("              local layers: base %g, unscaled\n", (double)ar->local_rotary_base);
    if (ar->moe_experts > 0 && ar->family != HS_FAMILY_QWEN3_MOE)
        printf("experts:      %d routed (%d a token, %s), %d shared, %d wide, from layer %d\n",
               ar->moe_experts, ar->moe_top_k, ar->moe_scoring == HS_MOE_SIGMOID ? "sigmoid"
                                                                                : "softmax",
               ar->moe_shared, ar->moe_ff, ar->moe_first_dense);
    else if (ar->moe_experts > 0)
        print_moe_layers(cfg);
}

/* The dimensions' lines, from d_model to the parameter count (none: vocab_only). */
static void print_dims(const hs_model *m, const hs_model_config *cfg, int vocab_only)
{
    const hs_arch *ar = cfg->arch;
    printf("d_model:      %d\n", cfg->d_model);
    printf("d_ff:         %d\n", cfg->d_ff);
    printf("context:      %d tokens\n", cfg->n_ctx);
    printf("vocab:        %d\n", cfg->vocab_size);
    if (ar->token_types)
        printf("token types:  %d\n", cfg->type_vocab_size);
    printf("lm head:      %s\n", cfg->has_lm_head ? (ar->head == HS_HEAD_MLM ? "MLM" : "yes") : "none");
    printf("layer norm:   eps %g\n", (double)cfg->ln_eps);
    if (vocab_only)
        printf("parameters:   none in the file (the dimensions above are its metadata)\n");
    else
        printf("parameters:   %zu\n", hs_model_param_count(m));
}

/* The converted layers' line under --weight-memory and the tables' line after it, for an
 * F16/BF16/quantised checkpoint only; g: the GGUF file's header or NULL. */
static void print_weight_memory(const hs_model *m, const hs_gguf *g)
{
    size_t conv = hs_model_converted_bytes(m), wm = hs_model_weight_memory(m);
    if (conv > 0) { /* the layers of an F16/BF16/quantised checkpoint (--weight-memory) */
        char budget[32] = "no bound";
        if (wm != HS_WEIGHT_MEMORY_ALL)
            snprintf(budget, sizeof budget, "%.0f MB", (double)wm / 1048576.0);
        if (hs_model_stored_weights(m) && wm <= 1 && m->unstorable_units) /* GPT-2 Conv1D */
            printf("layers f32:   %.1f MB converted from %s; budget 0 MB: stored (in, out), so "
                   "not multiplied in their stored type but converted again in every pass\n",
                   (double)conv / 1048576.0, hs_model_storage_dtype(m));
        else if (hs_model_stored_weights(m) && wm <= 1) /* `stored`, the default where it can */
            printf("layers f32:   %.1f MB if converted from %s; none converted: layers multiplied "
                   "in their stored type\n", (double)conv / 1048576.0, hs_model_storage_dtype(m));
        else
            printf("layers f32:   %.1f MB converted from %s; budget %s: %s\n",
                   (double)conv / 1048576.0, hs_model_storage_dtype(m), budget,
                   conv <= wm ? "converted once, at load"
                   : hs_model_stored_weights(m) ? "beyond it, layers multiplied in their stored type"
                                                : "beyond it, layers converted again in every pass");
    }
    if (conv > 0 && hs_model_stored_weights(m))
        print_tables(m, g);
}

/* The tokenizer's line: its kind, size, casing and post-processor (tok may be NULL). */
static void print_tokenizer(const hs_tokenizer *tok)
{
    if (tok)
        printf("tokenizer:    %s, %zu tokens%s%s%s\n",
               hs_tokenizer_kind_name(hs_tokenizer_get_kind(tok)), hs_tokenizer_vocab_size(tok),
               hs_tokenizer_get_kind(tok) == HS_TOK_WORDPIECE
                   ? (hs_tokenizer_lowercase(tok) ? ", lowercased" : ", cased")
                   : "",
               hs_tokenizer_has_pair(tok) && hs_tokenizer_get_kind(tok) != HS_TOK_WORDPIECE
                   ? ", post-processor " : "",
               hs_tokenizer_has_pair(tok) && hs_tokenizer_get_kind(tok) != HS_TOK_WORDPIECE
                   ? cli_shown(hs_tokenizer_post_processor(tok)) : "");
    else
        printf("tokenizer:    none (no tokenizer files)\n");
}

int cmd_info(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') {
            fputs(usage_text, stdout);
            return cli_finish_stdout("info");
        }
        return cli_option_error("info", c, argc, argv, opts);
    }
    if (optind != argc - 1)
        return cli_usage_error("info", optind >= argc ? "no MODEL given" : "more than one MODEL given");
    hs_model *m = cli_model_open("info", argv[optind], HS_OPEN_NO_WEIGHTS);
    if (!m)
        return EXIT_FAIL;
    /* a GGUF file's header, read once: the tables line and the listing at the end */
    hs_gguf *g = NULL;
    hs_error gerr = {{0}};
    if (hs_model_format(m) == HS_FORMAT_GGUF && hs_gguf_open(argv[optind], &g, &gerr) != HS_OK) {
        cli_error("info", "%s", gerr.msg);
        hs_model_free(m);
        return EXIT_FAIL;
    }
    const hs_model_config *cfg = hs_model_config_of(m);
    /* a GGUF file without tensors: llama.cpp's vocabulary-only files (ggml-vocab-*.gguf) */
    int vocab_only = hs_model_format(m) == HS_FORMAT_GGUF && hs_model_param_count(m) == 0;
    print_format(m, vocab_only);
    print_family(cfg);
    print_heads(cfg);
    print_dims(m, cfg, vocab_only);
    print_weight_memory(m, g);
    print_tokenizer(hs_model_tokenizer(m));
    if (g) {
        printf("\n");
        gguf_print_info(g, stdout);
    }
    hs_gguf_free(g);
    hs_model_free(m);
    return cli_finish_stdout("info");
}
