/* Model loading: every corrupt fixture in fixtures/bad (made by fixtures/ref/make_bad.py,
 * one defect each, see MANIFEST.tsv) gives its status and a message naming the problem;
 * valid models report the dimensions of their config. */
#include "headscope/forward.h"
#include "headscope/model.h"
#include "model/model_internal.h"
#include "testutil.h"

static void expect_fail(const char *dir, hs_status want, const char *needle)
{
    char path[256];
    snprintf(path, sizeof path, "fixtures/bad/%s", dir);
    hs_model *m = (hs_model *)1;
    hs_error err = {{0}};
    hs_status st = hs_model_load(path, &m, &err);
    cr_assert_eq(st, want, "%s: status %d (%s), want %d", dir, st, err.msg, want);
    cr_assert_null(m, "%s: *out must be NULL on failure", dir);
    cr_assert_not_null(strstr(err.msg, needle), "%s: message '%s' lacks '%s'", dir, err.msg, needle);
    cr_assert_null(strchr(err.msg, '\n'), "%s: message must be one line", dir);
}

#define BAD(name, st, needle) Test(model_bad, name) { expect_fail(#name, st, needle); }
BAD(truncated, HS_E_FORMAT, "beyond the 33692 data bytes")
BAD(header_len_too_big, HS_E_FORMAT, "header length 37032 is larger than the file")
BAD(short_file, HS_E_FORMAT, "too short for a safetensors header")
BAD(header_not_json, HS_E_FORMAT, "header is not valid JSON")
BAD(header_not_object, HS_E_FORMAT, "header is not a JSON object")
BAD(dtype_f64, HS_E_DTYPE, "tensor 'h.0.attn.c_attn.bias' has dtype 'F64'; weights must be F32, F16 or BF16")
BAD(dtype_i8, HS_E_DTYPE, "tensor 'h.0.attn.c_attn.bias' has dtype 'I8'; weights must be F32, F16 or BF16")
BAD(offsets_size_mismatch, HS_E_FORMAT, "span 60 bytes but shape and dtype need 64")
BAD(offsets_overlap, HS_E_FORMAT, "overlap")
BAD(offsets_out_of_range, HS_E_FORMAT, "tensor 'ln_f.bias': data_offsets end")
BAD(shape_mismatch, HS_E_SHAPE, "'h.0.attn.c_attn.weight' has shape (16, 32), expected (16, 48)")
BAD(shape_transposed, HS_E_SHAPE, "has shape (48, 16), expected (16, 48)")
BAD(nan_weight, HS_E_VALUE, "'h.1.mlp.c_fc.weight' holds a non-finite value (NaN) at element 37")
BAD(inf_weight, HS_E_VALUE, "(Inf) at element 37")
BAD(missing_tensor, HS_E_FORMAT, "missing tensor 'h.1.ln_2.bias'")
BAD(config_missing_n_embd, HS_E_FORMAT, "missing required field 'n_embd'")
BAD(config_not_json, HS_E_FORMAT, "config.json' is not a JSON object")
BAD(config_trailing_garbage, HS_E_FORMAT, "config.json' is not a JSON object (not valid JSON: text after the end of the JSON value at byte 234)")
BAD(config_nul_byte, HS_E_FORMAT, "config.json' is not a JSON object (not valid JSON: a NUL byte at byte 234)")
BAD(unknown_model_type, HS_E_UNSUPPORTED, "model_type 'bart' is not supported")
BAD(config_heads_indivisible, HS_E_VALUE, "d_model 16 is not divisible by n_head 3")
BAD(missing_safetensors, HS_E_IO, "model.safetensors")
BAD(missing_config, HS_E_IO, "has no config.json")
BAD(empty, HS_E_IO, "has no config.json")

Test(model_bad, missing_path)
{
    hs_model *m;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load("fixtures/bad/does-not-exist", &m, &err), HS_E_IO);
    cr_assert_not_null(strstr(err.msg, "No such file or directory"), "%s", err.msg);
}

Test(model_bad, plain_file_is_neither_folder_nor_gguf)
{
    hs_model *m;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load("fixtures/bad/MANIFEST.tsv", &m, &err), HS_E_FORMAT);
    cr_assert_not_null(strstr(err.msg, "neither a Hugging Face model folder nor a GGUF file"), "%s",
                       err.msg);
}

Test(model, valid_control_loads_with_config_dimensions)
{
    hs_model *m;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load("fixtures/bad/valid", &m, &err), HS_OK, "%s", err.msg);
    const hs_model_config *c = hs_model_config_of(m);
    cr_assert_eq(c->family, HS_FAMILY_GPT2);
    cr_assert_eq(c->vocab_size, 100);
    cr_assert_eq(c->n_layer, 2);
    cr_assert_eq(c->n_head, 2);
    cr_assert_eq(c->d_model, 16);
    cr_assert_eq(c->d_head, 8);
    cr_assert_eq(c->d_ff, 64);
    cr_assert_eq(c->n_ctx, 16);
    cr_assert_eq(c->causal, 1);
    /* wte 100x16 + wpe 16x16 + 2 layers + ln_f; counted by hand from the GPT-2 layout */
    size_t layer = 2 * 16 + 16 * 48 + 48 + 16 * 16 + 16 + 2 * 16 + 16 * 64 + 64 + 64 * 16 + 16;
    cr_assert_eq(hs_model_param_count(m), 100 * 16 + 16 * 16 + 2 * layer + 2 * 16);
    cr_assert_null(hs_model_tokenizer(m));
    hs_model_free(m);
}

Test(model, tiny_bert_has_mlm_head_and_tokenizer)
{
    hs_model *m;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load("fixtures/tiny-bert", &m, &err), HS_OK, "%s", err.msg);
    const hs_model_config *c = hs_model_config_of(m);
    cr_assert_eq(c->family, HS_FAMILY_BERT);
    cr_assert_eq(c->n_layer, 4);
    cr_assert_eq(c->type_vocab_size, 2);
    cr_assert_eq(c->has_lm_head, 1);
    cr_assert_eq(c->act, HS_ACT_GELU_ERF);
    cr_assert_float_eq(c->ln_eps, 1e-12f, 1e-18f);
    cr_assert_str_eq(hs_model_storage_dtype(m), "F16");
    cr_assert_not_null(hs_model_tokenizer(m));
    hs_model_free(m);
}

Test(model, bert_without_mlm_head_has_no_lm_head)
{
    hs_model *m;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load("fixtures/models/bert-legacy", &m, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_model_config_of(m)->has_lm_head, 0);
    hs_model_free(m);
}

Test(model, free_accepts_null)
{
    hs_model_free(NULL);
}

/* Opening without weights checks the same table and reports the same numbers as a full
 * load, holds no weights, and the forward pass refuses it. */
Test(model, open_without_weights_reports_the_full_load_numbers)
{
    static const char *const dirs[] = {"fixtures/trained-gpt2", "fixtures/models/bert-hub",
                                       "fixtures/models/gpt2-prefixed", "fixtures/tiny-bert"};
    for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++) {
        hs_model *full, *hdr;
        hs_error err = {{0}};
        cr_assert_eq(hs_model_load(dirs[k], &full, &err), HS_OK, "%s", err.msg);
        cr_assert_eq(hs_model_open(dirs[k], HS_OPEN_NO_WEIGHTS, &hdr, &err), HS_OK, "%s", err.msg);
        cr_assert_eq(hs_model_param_count(hdr), hs_model_param_count(full), "%s", dirs[k]);
        cr_assert_str_eq(hs_model_storage_dtype(hdr), hs_model_storage_dtype(full), "%s", dirs[k]);
        cr_assert_eq(hs_model_config_of(hdr)->has_lm_head, hs_model_config_of(full)->has_lm_head);
        cr_assert_eq(hs_model_has_weights(full), 1);
        cr_assert_eq(hs_model_has_weights(hdr), 0);
        hs_forward_ws *ws = NULL;
        cr_assert_eq(hs_forward_ws_new(hdr, 4, &ws, &err), HS_E_ARG);
        cr_assert(strstr(err.msg, "without its weights"), "%s", err.msg);
        hs_model_free(hdr);
        hs_model_free(full);
    }
}

/* A tokenizer-only open needs config.json and the tokenizer files, nothing else. */
Test(model, open_tokenizer_only_needs_no_weights_file)
{
    char dir[64], cmd[512];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(cmd, sizeof cmd, "cp fixtures/trained-gpt2/config.json fixtures/trained-gpt2/vocab.json "
             "fixtures/trained-gpt2/merges.txt '%s/'", dir);
    cr_assert_eq(system(cmd), 0);
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load(dir, &m, &err), HS_E_IO, "a full load needs the weights");
    cr_assert_eq(hs_model_open(dir, HS_OPEN_TOKENIZER, &m, &err), HS_OK, "%s", err.msg);
    cr_assert_not_null(hs_model_tokenizer(m));
    cr_assert_eq(hs_tokenizer_id(hs_model_tokenizer(m), "Ġworld"), 995);
    hs_model_free(m);
    tu_rm_rf(dir);
}

/* With HS_OPEN_MAP_WEIGHTS, F32 weights already in the normalised layout are used where
 * they lie in the mapped file (GPT-2: every tensor; BERT: the embeddings), so a load holds
 * no second copy of them; F16 weights are converted into the arena. By default every weight
 * is copied into the arena. */
Test(model, f32_weights_are_used_in_place_on_request)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_load("fixtures/models/gpt2-hub", &m, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(m->inplace_floats, 0u);
    cr_assert_null(m->map);
    hs_model_free(m);
    cr_assert_eq(hs_model_open("fixtures/models/gpt2-hub", HS_OPEN_MAP_WEIGHTS, &m, &err), HS_OK,
                 "%s", err.msg);
    cr_assert_eq(m->inplace_floats, hs_model_param_count(m));
    cr_assert_eq(m->arena_floats, 0u);
    const unsigned char *lo = m->map, *hi = lo + m->map_len;
    const unsigned char *w = (const unsigned char *)(const void *)m->layers[1].w_fc;
    cr_assert(w >= lo && w < hi, "c_fc points into the file");
    hs_model_free(m);

    cr_assert_eq(hs_model_open("fixtures/models/bert-hub", HS_OPEN_MAP_WEIGHTS, &m, &err), HS_OK,
                 "%s", err.msg);
    size_t V = (size_t)m->cfg.vocab_size, d = (size_t)m->cfg.d_model;
    cr_assert_eq(m->inplace_floats, (V + (size_t)m->cfg.n_ctx + (size_t)m->cfg.type_vocab_size) * d + 2 * d);
    cr_assert_eq(m->arena_floats + m->inplace_floats, hs_model_param_count(m));
    hs_model_free(m);

    cr_assert_eq(hs_model_open("fixtures/models/gpt2-f16", HS_OPEN_MAP_WEIGHTS, &m, &err), HS_OK,
                 "%s", err.msg);
    cr_assert_eq(m->inplace_floats, 0u);
    cr_assert_null(m->map);
    hs_model_free(m);
}

/* ---- the architecture descriptor -------------------------------------------------- */

/* A GPT-2 config as the loaders fill it, with the descriptor a (a modified copy). */
static hs_status validate_with(const hs_arch *a, hs_error *err)
{
    hs_model_config c = {.family = HS_FAMILY_GPT2, .n_layer = 1, .n_head = 2, .d_model = 8,
                         .d_ff = 32, .n_ctx = 8, .vocab_size = 16, .ln_eps = 1e-5f,
                         .act = HS_ACT_GELU_TANH, .arch = a};
    return hs_config_validate(&c, err);
}

Test(arch, descriptors_of_the_families)
{
    const hs_arch *g = hs_arch_find("gpt2"), *b = hs_arch_find("bert");
    cr_assert_not_null(g);
    cr_assert_not_null(b);
    cr_assert_null(hs_arch_find("bart"));
    cr_assert_eq(hs_arch_of(HS_FAMILY_GPT2), g);
    cr_assert_eq(hs_arch_of(HS_FAMILY_BERT), b);
    /* GPT-2 (Radford et al. 2019): pre-LN, causal, gelu tanh, tied decoder, no types */
    cr_assert(g->norm_place == HS_NORM_PRE && hs_vis_is_causal(g->vis) && g->act == HS_ACT_GELU_TANH &&
              g->tied_embeddings && !g->token_types && !g->emb_norm && g->head == HS_HEAD_DECODER);
    /* BERT (Devlin et al. 2019): post-LN, bidirectional, erf gelu, token types, MLM head */
    cr_assert(b->norm_place == HS_NORM_POST && !hs_vis_is_causal(b->vis) && b->act == HS_ACT_GELU_ERF &&
              b->token_types && b->emb_norm && b->head == HS_HEAD_MLM && b->head_optional);
    cr_assert_str_eq(b->cls_token, "[CLS]");
    cr_assert_null(g->cls_token);
    cr_assert_str_eq(hs_family_name(HS_FAMILY_BERT), "bert");
    /* RoBERTa (Liu et al. 2019) and DistilBERT (Sanh et al. 2019): BERT's post-LN encoder;
     * RoBERTa's positions start after padding_idx, DistilBERT has no token types */
    const hs_arch *r = hs_arch_find("roberta"), *d = hs_arch_find("distilbert");
    cr_assert(r && d && hs_arch_of(HS_FAMILY_ROBERTA) == r && hs_arch_of(HS_FAMILY_DISTILBERT) == d);
    cr_assert(r->norm_place == HS_NORM_POST && !hs_vis_is_causal(r->vis) && r->token_types && r->emb_norm &&
              r->pos_skips_pad && r->head == HS_HEAD_MLM && r->head_optional);
    cr_assert(d->norm_place == HS_NORM_POST && !hs_vis_is_causal(d->vis) && !d->token_types && d->emb_norm &&
              !d->pos_skips_pad && d->pos_offset == 0 && d->head == HS_HEAD_MLM);
    cr_assert_str_eq(r->cls_token, "<s>");
    cr_assert_str_eq(r->sep_token, "</s>");
    cr_assert_str_eq(d->mask_token, "[MASK]");
}

Test(arch, combinations_not_implemented_fail_naming_them)
{
    struct {
        int field;
        const char *msg;
    } want[] = {
        {0, "architecture 'gpt2': a visibility (causal, bidirectional, window or prefix) out of "
            "its range is not implemented"},
        {1, "architecture 'gpt2': the parallel residual in a post-norm block is not implemented"},
        {2, "architecture 'gpt2': rotary embeddings on 0 or an odd number of dimensions, or more "
            "than a head has, is not implemented"},
        {3, "architecture 'gpt2': rotary embeddings in a bidirectional model is not implemented"},
        {4, "architecture 'gpt2': a number of query heads that is not a multiple of the key/value "
            "heads is not implemented"},
        {5, "architecture 'gpt2': grouped key/value heads in a post-norm block is not implemented"},
    };
    hs_error err = {{0}};
    cr_assert_eq(validate_with(hs_arch_find("gpt2"), &err), HS_OK, "%s", err.msg);
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        hs_arch a = *hs_arch_find("gpt2");
        switch (want[k].field) {
        case 0: a.sliding_window = -1; break;
        case 1: a.norm_place = HS_NORM_POST; a.parallel_residual = 1; break;
        case 2: a.pos = HS_POS_ROTARY; a.rotary_dims = 0; break;
        case 3: a.pos = HS_POS_ROTARY; a.rotary_dims = 2; a.vis = hs_vis_bidirectional(); break;
        case 4: a.n_kv_head = 3; break;
        case 5: a.norm_place = HS_NORM_POST; a.n_kv_head = 1; break;
        }
        hs_error e = {{0}};
        cr_assert_eq(validate_with(&a, &e), HS_E_UNSUPPORTED, "case %zu: %s", k, e.msg);
        cr_assert_str_eq(e.msg, want[k].msg);
    }
    /* what the rotary decoders combine is accepted */
    const char *fam[] = {"gpt_neox", "llama", "qwen2"};
    for (int k = 0; k < 3; k++) {
        hs_arch a = *hs_arch_find(fam[k]);
        a.rotary_dims = 4;
        hs_model_config c = {.n_layer = 1, .n_head = 2, .d_model = 8, .d_ff = 32, .n_ctx = 8,
                             .vocab_size = 16, .ln_eps = 1e-5f, .act = a.act, .arch = &a};
        hs_error e = {{0}};
        cr_assert_eq(hs_config_validate(&c, &e), HS_OK, "%s: %s", fam[k], e.msg);
        cr_assert_eq(c.n_kv_head, 2);
    }
}

/* The name tables, against the names the checkpoints and llama.cpp's converter write
 * (typed from transformers' modeling_gpt2.py / modeling_bert.py and llama.cpp's
 * gguf-py constants), as the walk yields them for a 2-layer model. */
typedef struct {
    char hf[64][64], gguf[64][64];
    int n;
} walked;

static hs_status collect(void *ctx, const hs_tensor_name *e, int layer, hs_error *err)
{
    walked *w = ctx;
    (void)err;
    hs_names_format(e->hf, layer, w->hf[w->n], sizeof w->hf[0]);
    hs_names_format(e->gguf, layer, w->gguf[w->n], sizeof w->gguf[0]);
    w->n++;
    return HS_OK;
}

Test(arch, name_tables_walk_in_gguf_order)
{
    hs_model_config c = {.family = HS_FAMILY_GPT2, .n_layer = 2, .arch = hs_arch_find("gpt2")};
    walked w = {0};
    cr_assert_eq(hs_names_walk(&c, collect, &w, NULL), HS_OK);
    cr_assert_eq(w.n, 2 + 2 * 12 + 3);
    cr_assert_str_eq(w.hf[0], "wte.weight");
    cr_assert_str_eq(w.gguf[2], "blk.0.attn_norm.weight");
    cr_assert_str_eq(w.hf[4], "h.0.attn.c_attn.weight");
    cr_assert_str_eq(w.gguf[4 + 12], "blk.1.attn_qkv.weight");
    cr_assert_str_eq(w.hf[2 + 24], "ln_f.weight");
    cr_assert_str_eq(w.gguf[2 + 24], "output_norm.weight");
    cr_assert_str_eq(w.gguf[w.n - 1], "output.weight");

    c = (hs_model_config){.family = HS_FAMILY_BERT, .n_layer = 2, .arch = hs_arch_find("bert")};
    w = (walked){0};
    cr_assert_eq(hs_names_walk(&c, collect, &w, NULL), HS_OK);
    cr_assert_eq(w.n, 5 + 2 * 16 + 6);
    cr_assert_str_eq(w.gguf[2], "token_types.weight");
    cr_assert_str_eq(w.hf[5], "encoder.layer.0.attention.self.query.weight");
    cr_assert_str_eq(w.gguf[5], "blk.0.attn_q.weight");
    cr_assert_str_eq(w.gguf[5 + 16 + 15], "blk.1.layer_output_norm.bias");
    cr_assert_str_eq(w.hf[w.n - 2], "cls.predictions.bias");
}

/* The rows a one-layer model of the family asks for, in order, as "hf gguf" lines. The
 * expected lists are typed from transformers' modeling_gpt_neox.py / modeling_llama.py /
 * modeling_qwen2.py names and llama.cpp's gguf-py constants.py (MODEL_ARCH.GPTNEOX, LLAMA,
 * QWEN2 tensor lists); the walk leaves out what the descriptor does not have. */
static void expect_walk(const char *family, int qkv_bias, const char *const *want, int n_want)
{
    hs_arch a = *hs_arch_find(family);
    a.qkv_bias = qkv_bias || a.qkv_bias;
    hs_model_config c = {.n_layer = 1, .n_head = 2, .d_model = 8, .d_ff = 16, .arch = &a};
    walked w = {0};
    cr_assert_eq(hs_names_walk(&c, collect, &w, NULL), HS_OK);
    cr_expect_eq(w.n, n_want, "%s: %d rows", family, w.n);
    for (int k = 0; k < w.n && k < n_want; k++) { /* walked holds 64 rows */
        char got[160];
        snprintf(got, sizeof got, "%s %s", w.hf[k], w.gguf[k]);
        cr_expect_str_eq(got, want[k], "%s row %d", family, k);
    }
}

Test(arch, rotary_decoder_tables_name_what_transformers_and_llama_cpp_write)
{
    static const char *const neox[] = {
        "embed_in.weight token_embd.weight",
        "layers.0.input_layernorm.weight blk.0.attn_norm.weight",
        "layers.0.input_layernorm.bias blk.0.attn_norm.bias",
        "layers.0.attention.query_key_value.weight blk.0.attn_qkv.weight",
        "layers.0.attention.query_key_value.bias blk.0.attn_qkv.bias",
        "layers.0.attention.dense.weight blk.0.attn_output.weight",
        "layers.0.attention.dense.bias blk.0.attn_output.bias",
        "layers.0.post_attention_layernorm.weight blk.0.ffn_norm.weight",
        "layers.0.post_attention_layernorm.bias blk.0.ffn_norm.bias",
        "layers.0.mlp.dense_h_to_4h.weight blk.0.ffn_up.weight",
        "layers.0.mlp.dense_h_to_4h.bias blk.0.ffn_up.bias",
        "layers.0.mlp.dense_4h_to_h.weight blk.0.ffn_down.weight",
        "layers.0.mlp.dense_4h_to_h.bias blk.0.ffn_down.bias",
        "final_layer_norm.weight output_norm.weight",
        "final_layer_norm.bias output_norm.bias",
        "embed_out.weight output.weight",
    };
    static const char *const llama[] = {
        "embed_tokens.weight token_embd.weight",
        "layers.0.input_layernorm.weight blk.0.attn_norm.weight",
        "layers.0.self_attn.q_proj.weight blk.0.attn_q.weight",
        "layers.0.self_attn.k_proj.weight blk.0.attn_k.weight",
        "layers.0.self_attn.v_proj.weight blk.0.attn_v.weight",
        "layers.0.self_attn.o_proj.weight blk.0.attn_output.weight",
        "layers.0.post_attention_layernorm.weight blk.0.ffn_norm.weight",
        "layers.0.mlp.gate_proj.weight blk.0.ffn_gate.weight",
        "layers.0.mlp.up_proj.weight blk.0.ffn_up.weight",
        "layers.0.mlp.down_proj.weight blk.0.ffn_down.weight",
        "norm.weight output_norm.weight",
        "lm_head.weight output.weight",
    };
    expect_walk("gpt_neox", 0, neox, (int)(sizeof neox / sizeof neox[0]));
    expect_walk("llama", 0, llama, (int)(sizeof llama / sizeof llama[0]));
    /* Qwen2: Llama's rows with a bias after each of q, k and v (attn_q.bias ...) */
    char rows[16][160];
    const char *qwen2[16];
    int nq = 0;
    for (size_t k = 0; k < sizeof llama / sizeof llama[0]; k++) {
        snprintf(rows[nq], sizeof rows[nq], "%s", llama[k]);
        qwen2[nq] = rows[nq];
        nq++;
        if (strstr(llama[k], "q_proj") || strstr(llama[k], "k_proj") || strstr(llama[k], "v_proj")) {
            char hf[64], gg[64];
            cr_assert_eq(sscanf(llama[k], "%63s %63s", hf, gg), 2);
            *strstr(hf, ".weight") = 0;
            *strstr(gg, ".weight") = 0;
            snprintf(rows[nq], sizeof rows[nq], "%s.bias %s.bias", hf, gg);
            qwen2[nq] = rows[nq];
            nq++;
        }
    }
    expect_walk("qwen2", 0, qwen2, nq);
    cr_expect_str_eq(hs_arch_find("gpt_neox")->names->hf_prefix, "gpt_neox.");
    cr_expect_str_eq(hs_arch_find("llama")->names->hf_prefix, "model.");
}
