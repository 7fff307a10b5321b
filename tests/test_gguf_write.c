/* GGUF, the writer: headscope's writer produces the same bytes as the independent Python
 * writer (fixtures/gguf/write_gguf.py) and round-trips through the reader; untied heads,
 * fused BERT Q/K/V and weights-only files; what llama.cpp expects of a file (the tied
 * head's copy, BERT's bracketed tokens) and vocabulary-only files. */
#include <sys/stat.h>

#include "gguf_util.h"

#define PYTHON "/usr/bin/python3"

/* ---- helpers -------------------------------------------------------------------- */

/* Runs the independent Python writer on folder. */
static void python_convert(const char *folder, const char *out, const char *type, const char *name)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, PYTHON " fixtures/gguf/write_gguf.py '%s' '%s' --type %s --name '%s'",
             folder, out, type, name);
    cr_assert_eq(system(cmd), 0, "python writer failed: %s", cmd);
}

/* The first differing byte of two buffers, or -1. */
static long first_diff(const unsigned char *a, size_t na, const unsigned char *b, size_t nb)
{
    size_t n = na < nb ? na : nb;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (long)i;
    return na == nb ? -1 : (long)n;
}

static void expect_ids(const hs_model *m, const char *text, const int32_t *want, size_t n)
{
    hs_encoding e = {0};
    hs_error err = {{0}};
    const hs_tokenizer *t = hs_model_tokenizer(m);
    cr_assert_not_null(t);
    cr_assert_eq(hs_tokenizer_encode(t, text, strlen(text), NULL, 0, &e, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(e.n, n, "'%s': %zu tokens, want %zu", text, e.n, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(e.ids[i], want[i], "'%s': id %zu is %d, want %d", text, i, e.ids[i], want[i]);
    hs_encoding_free(&e);
}

/* ---- the writer ------------------------------------------------------------------------- */

Test(gguf, writer_matches_python_writer_byte_for_byte_on_tiny_fixture)
{
    hs_model *hf = tu_load_converted(TINY_HF);
    static const char *const types[] = {"f32", "f16", "bf16", "q8_0"};
    for (size_t i = 0; i < 4; i++) {
        hs_gguf_write_options opt = {.name = "tiny-gpt2"};
        cr_assert_eq(hs_gguf_ftype_parse(types[i], &opt.ftype), HS_OK);
        unsigned char *mine = NULL;
        size_t n = 0;
        hs_error err = {{0}};
        cr_assert_eq(hs_gguf_encode(hf, &opt, &mine, &n, &err), HS_OK, "%s", err.msg);
        char path[256];
        snprintf(path, sizeof path, GOOD "tiny-gpt2-%s.gguf", types[i]);
        size_t pn;
        unsigned char *ref = tu_slurp(path, &pn);
        long at = first_diff(mine, n, ref, pn);
        cr_assert_eq(at, -1, "%s: first difference at byte %ld (sizes %zu, %zu)", types[i], at, n, pn);
        free(ref);
        free(mine);
    }
    hs_model_free(hf);
}

/* Converts the model folder `folder` with the independent Python writer and with headscope's
 * writer: same bytes, same weights as the folder, same token ids. */
static void model_case(const char *folder, const char *name, const char *type, int exact)
{
    char dir[64], py[256], mine[256];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(py, sizeof py, "%s/py.gguf", dir);
    snprintf(mine, sizeof mine, "%s/model.bin", dir);
    python_convert(folder, py, type, name);

    hs_model *hf = tu_load_converted(folder);
    hs_gguf_write_options opt = {.name = name};
    cr_assert_eq(hs_gguf_ftype_parse(type, &opt.ftype), HS_OK);
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_write(hf, mine, &opt, &err), HS_OK, "%s", err.msg);
    struct stat sb;
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", mine);
    cr_assert_neq(stat(tmp, &sb), 0, "the .tmp file must be gone");

    size_t na, nb;
    unsigned char *a = tu_slurp(mine, &na), *b = tu_slurp(py, &nb);
    long at = first_diff(a, na, b, nb);
    cr_assert_eq(at, -1, "%s %s: first difference at byte %ld (sizes %zu, %zu)", name, type, at, na, nb);
    free(a);
    free(b);

    hs_model *g = tu_load_converted(py);
    double dmax = model_diff(hf, g, 0);
    if (exact)
        cr_assert_eq(dmax, 0.0, "%s: weights differ by %g", name, dmax);
    else
        cr_assert_leq(dmax, 0.02, "%s %s: weights differ by %g", name, type, dmax);
    if (hf->cfg.family == HS_FAMILY_GPT2) {
        static const int32_t hello[] = {15496, 995};
        expect_ids(g, "Hello world", hello, 2);
        expect_same_ids(hf, g, "hello <|endoftext|> world");
        expect_same_ids(hf, g, "The cat sat on the mat. Ünïcödé 🙂  spaces\n\tand tabs");
    } else {
        static const int32_t hello[] = {101, 7592, 2088, 102};
        expect_ids(g, "hello world", hello, 4);
        expect_same_ids(hf, g, "The capital of France is [MASK].");
        expect_same_ids(hf, g, "Ünïcödé héllo, unaffable [SEP] [mask] 12,345");
        cr_assert_eq(hs_tokenizer_lowercase(hs_model_tokenizer(g)), 1);
        cr_assert_eq(g->cfg.has_lm_head, 0, "convert leaves BERT's MLM head out");
    }
    hs_model_free(g);
    hs_model_free(hf);
    tu_rm_rf(dir);
}

Test(gguf, tiny_gpt2_f32_python_file_equals_hf_and_writer, .timeout = 120)
{
    model_case("fixtures/tiny-gpt2", "tiny-gpt2", "f32", 1);
}

Test(gguf, tiny_bert_f32_python_file_equals_hf_and_writer, .timeout = 120)
{
    model_case("fixtures/tiny-bert", "tiny-bert", "f32", 1);
}

Test(gguf, trained_gpt2_f16_python_file_equals_hf_and_writer, .timeout = 120)
{
    model_case("fixtures/trained-gpt2", "trained-gpt2", "f16", 1);
}

Test(gguf, tiny_gpt2_q8_0_matches_python_writer, .timeout = 120)
{
    model_case("fixtures/tiny-gpt2", "tiny-gpt2", "q8_0", 0);
}

Test(gguf, tiny_bert_bf16_matches_python_writer, .timeout = 120)
{
    model_case("fixtures/tiny-bert", "tiny-bert", "bf16", 0);
}

/* The F32 originals of the shipped tiny models, when ../shared is beside the clone. */
static void shared_case(const char *name, const char *type, int exact)
{
    char folder[256];
    snprintf(folder, sizeof folder, SHARED_MODELS "/%s", name);
    if (access(folder, R_OK) != 0)
        cr_skip_test("%s is absent (only beside the development checkout)", folder);
    model_case(folder, name, type, exact);
}

Test(gguf, shared_tiny_gpt2_f32_python_file_equals_hf_and_writer, .timeout = 120)
{
    shared_case("tiny-gpt2", "f32", 1);
}

Test(gguf, shared_tiny_bert_q8_0_matches_python_writer, .timeout = 120)
{
    shared_case("tiny-bert", "q8_0", 0);
}

Test(gguf, round_trip_in_memory_keeps_every_weight)
{
    hs_model *hf = tu_load_converted("fixtures/tiny-bert");
    hs_gguf_write_options opt = {.ftype = HS_GGUF_FTYPE_F32, .keep_mlm = 1};
    unsigned char *buf = NULL;
    size_t n = 0;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_encode(hf, &opt, &buf, &n, &err), HS_OK, "%s", err.msg);
    hs_gguf *g = NULL;
    cr_assert_eq(hs_gguf_parse(buf, n, &g, &err), HS_OK, "%s", err.msg);
    cr_assert_not_null(hs_gguf_find_tensor(g, "cls.predictions.transform.dense.weight"));
    cr_assert_eq(hs_gguf_tensor_count(g), 5 + 4 * 16 + 5);
    hs_gguf_free(g);

    char dir[64], path[128];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    tu_write_file(path, buf, n);
    hs_model *back = tu_load_converted(path);
    cr_assert_eq(back->cfg.has_lm_head, 1);
    cr_assert_eq(model_diff(hf, back, 1), 0.0);
    cr_assert_eq(hs_model_param_count(back), hs_model_param_count(hf));
    expect_same_ids(hf, back, "hello world");
    hs_model_free(back);
    tu_rm_rf(dir);
    free(buf);
    hs_model_free(hf);
}

Test(gguf, writer_is_atomic_and_reports_io_errors)
{
    hs_model *hf = tu_load_converted(TINY_HF);
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_write(hf, "/nonexistent-dir/model.bin", NULL, &err), HS_E_IO);
    cr_assert_not_null(strstr(err.msg, "cannot write '/nonexistent-dir/model.bin'"), "%s", err.msg);
    /* a symlink planted at the old predictable temporary name is never followed: the file
     * it points to keeps its bytes, and the output still appears */
    char dir[64], out[128], tmp[140], victim[128];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(out, sizeof out, "%s/m.bin", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    FILE *v = fopen(victim, "w");
    cr_assert_not_null(v);
    fputs("keep", v);
    fclose(v);
    cr_assert_eq(symlink(victim, tmp), 0);
    cr_assert_eq(hs_gguf_write(hf, out, NULL, &err), HS_OK, "%s", err.msg);
    size_t n;
    unsigned char *kept = tu_slurp(victim, &n);
    cr_assert(n == 4 && !memcmp(kept, "keep", 4), "the planted link was followed");
    free(kept);
    struct stat sb;
    cr_assert_eq(stat(out, &sb), 0);
    tu_rm_rf(dir);
    hs_model_free(hf);
}

Test(gguf, ftype_names)
{
    hs_gguf_ftype t;
    cr_assert_eq(hs_gguf_ftype_parse("Q8_0", &t), HS_OK);
    cr_assert_eq(t, HS_GGUF_FTYPE_Q8_0);
    cr_assert_eq(hs_gguf_ftype_parse("bf16", &t), HS_OK);
    cr_assert_eq(t, HS_GGUF_FTYPE_BF16);
    cr_assert_eq(hs_gguf_ftype_parse("q4_0", &t), HS_E_ARG);
    cr_assert_eq(hs_gguf_ftype_parse("f1", &t), HS_E_ARG);
    cr_assert_eq(hs_gguf_ftype_parse("f160", &t), HS_E_ARG);
}

/* ---- variants: untied head, fused BERT QKV, weights-only files -------------------------- */

/* A temporary model folder: config and weights of fixture `model` (symlinked) plus
 * tokenizer files. */
static void make_folder(char *dir, size_t cap, const char *model, int bert)
{
    char cwd[512], tok[512], cmd[2048];
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    tu_mkdtemp(dir, cap);
    if (bert)
        snprintf(tok, sizeof tok, "head -n 1000 fixtures/tiny-bert/vocab.txt > '%s/vocab.txt'",
                 dir);
    else
        snprintf(tok, sizeof tok, "cp %s/vocab.json %s/merges.txt '%s/'", TINY_HF, TINY_HF, dir);
    snprintf(cmd, sizeof cmd,
             "ln -s '%s/fixtures/models/%s/config.json' '%s/config.json' && "
             "ln -s '%s/fixtures/models/%s/model.safetensors' '%s/model.safetensors' && %s",
             cwd, model, dir, cwd, model, dir, tok);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

Test(gguf, untied_gpt2_head_is_written_as_output_weight)
{
    char dir[64], folder[128], py[160], mine[160];
    make_folder(dir, sizeof dir, "gpt2-prefixed", 0);
    snprintf(folder, sizeof folder, "%s", dir);
    snprintf(py, sizeof py, "%s/py.gguf", dir);
    snprintf(mine, sizeof mine, "%s/mine.gguf", dir);
    hs_model *hf = tu_load_converted(folder);
    cr_assert_neq(hf->decoder, hf->wte, "the fixture has an untied head");
    python_convert(folder, py, "f32", "x");
    hs_gguf_write_options opt = {.ftype = HS_GGUF_FTYPE_F32, .name = "x"};
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_write(hf, mine, &opt, &err), HS_OK, "%s", err.msg);
    size_t na, nb;
    unsigned char *a = tu_slurp(mine, &na), *b = tu_slurp(py, &nb);
    long at = first_diff(a, na, b, nb);
    cr_assert_eq(at, -1, "first difference at byte %ld", at);
    free(a);
    free(b);
    hs_gguf *g = NULL;
    cr_assert_eq(hs_gguf_open(mine, &g, &err), HS_OK, "%s", err.msg);
    cr_assert_not_null(hs_gguf_find_tensor(g, "output.weight"));
    /* ids the 271-token vocabulary lacks are padded as [PAD{i}] with type UNUSED */
    long ti = hs_gguf_find_kv(g, "tokenizer.ggml.tokens");
    cr_assert_eq(hs_gguf_kv_len(g, (size_t)ti), 1000);
    hs_gguf_value v;
    hs_gguf_kv_get(g, (size_t)ti, 999, &v);
    cr_assert_str_eq(v.str, "[PAD999]");
    hs_gguf_free(g);
    hs_model *back = tu_load_converted(mine);
    cr_assert_neq(back->decoder, back->wte);
    cr_assert_eq(model_diff(hf, back, 0), 0.0);
    cr_assert_eq(diff(hf->decoder, back->decoder, 1000 * 64), 0.0);
    hs_model_free(back);
    hs_model_free(hf);
    tu_rm_rf(dir);
}

Test(gguf, reads_bert_with_fused_qkv)
{
    char dir[64], py[160];
    make_folder(dir, sizeof dir, "bert-legacy", 1);
    snprintf(py, sizeof py, "%s/fused.gguf", dir);
    char cmd[512];
    snprintf(cmd, sizeof cmd, PYTHON " fixtures/gguf/write_gguf.py '%s' '%s' --fused-qkv", dir, py);
    cr_assert_eq(system(cmd), 0);
    hs_gguf *g = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_open(py, &g, &err), HS_OK, "%s", err.msg);
    cr_assert_not_null(hs_gguf_find_tensor(g, "blk.0.attn_qkv.weight"));
    cr_assert_null(hs_gguf_find_tensor(g, "blk.0.attn_q.weight"));
    hs_gguf_free(g);
    hs_model *hf = tu_load_converted(dir), *back = tu_load_converted(py);
    cr_assert_eq(model_diff(hf, back, 0), 0.0);
    expect_same_ids(hf, back, "[CLS] ! \" # [SEP]");
    hs_model_free(back);
    hs_model_free(hf);
    tu_rm_rf(dir);
}

Test(gguf, weights_only_file_loads_without_tokenizer_and_is_not_rewritten)
{
    char dir[64], py[160], out[160];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(py, sizeof py, "%s/w.gguf", dir);
    snprintf(out, sizeof out, "%s/again.gguf", dir);
    char cmd[512];
    snprintf(cmd, sizeof cmd, PYTHON " fixtures/gguf/write_gguf.py " TINY_HF " '%s' --no-tokenizer", py);
    cr_assert_eq(system(cmd), 0);
    hs_model *m = tu_load_converted(py);
    cr_assert_null(hs_model_tokenizer(m));
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_write(m, out, NULL, &err), HS_E_UNSUPPORTED);
    cr_assert_not_null(strstr(err.msg, "no tokenizer"), "%s", err.msg);
    struct stat sb;
    cr_assert_neq(stat(out, &sb), 0);
    hs_model_free(m);
    tu_rm_rf(dir);
}

/* ---- llama.cpp interoperability: the tied head's copy, BERT's bracketed tokens,
 * vocabulary-only files ----------------------------------------------------------------- */

/* headscope's file of the tied tiny GPT-2, parsed. */
static hs_gguf *encode_parse(const hs_model *m, const hs_gguf_write_options *opt,
                             unsigned char **buf)
{
    size_t n = 0;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_encode(m, opt, buf, &n, &err), HS_OK, "%s", err.msg);
    hs_gguf *g = NULL;
    cr_assert_eq(hs_gguf_parse(*buf, n, &g, &err), HS_OK, "%s", err.msg);
    return g;
}

Test(gguf, tied_gpt2_head_is_copied_into_output_weight_unless_asked_not_to)
{
    hs_model *hf = tu_load_converted(TINY_HF);
    cr_assert_eq(hf->decoder, hf->wte, "the fixture's head is tied");
    static const hs_gguf_ftype types[] = {HS_GGUF_FTYPE_F32, HS_GGUF_FTYPE_F16,
                                          HS_GGUF_FTYPE_BF16, HS_GGUF_FTYPE_Q8_0};
    for (size_t k = 0; k < 4; k++) {
        hs_gguf_write_options opt = {.ftype = types[k]};
        unsigned char *buf = NULL;
        hs_gguf *g = encode_parse(hf, &opt, &buf);
        const hs_gguf_tensor *e = hs_gguf_find_tensor(g, "token_embd.weight"),
                             *o = hs_gguf_find_tensor(g, "output.weight");
        cr_assert_not_null(o, "type %d: no output.weight", (int)types[k]);
        cr_assert_eq(o->type, e->type);
        cr_assert_eq(o->n_dims, 2);
        cr_assert(o->ne[0] == 8 && o->ne[1] == 271, "output.weight ne {%lld, %lld}",
                  (long long)o->ne[0], (long long)o->ne[1]);
        cr_assert_eq(o->nbytes, e->nbytes);
        cr_assert_eq(memcmp(o->data, e->data, (size_t)e->nbytes), 0, "the copy differs");
        hs_gguf_free(g);
        free(buf);
    }
    /* without the copy: the newer converters' layout, byte for byte as the Python writer */
    char dir[64], py[128], mine[128], cmd[512];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(py, sizeof py, "%s/py.gguf", dir);
    snprintf(mine, sizeof mine, "%s/mine.gguf", dir);
    snprintf(cmd, sizeof cmd, PYTHON " fixtures/gguf/write_gguf.py " TINY_HF " '%s' --name tiny-gpt2 "
             "--no-output-copy", py);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    hs_gguf_write_options opt = {.ftype = HS_GGUF_FTYPE_F32, .name = "tiny-gpt2", .no_output_copy = 1};
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_write(hf, mine, &opt, &err), HS_OK, "%s", err.msg);
    size_t na, nb;
    unsigned char *a = tu_slurp(mine, &na), *b = tu_slurp(py, &nb);
    long at = first_diff(a, na, b, nb);
    cr_assert_eq(at, -1, "first difference at byte %ld (sizes %zu, %zu)", at, na, nb);
    hs_gguf *g = NULL;
    cr_assert_eq(hs_gguf_parse(a, na, &g, &err), HS_OK, "%s", err.msg);
    cr_assert_null(hs_gguf_find_tensor(g, "output.weight"));
    cr_assert_eq(hs_gguf_tensor_count(g), 16);
    hs_gguf_free(g);
    free(a);
    free(b);
    /* both layouts read back tied, to the folder's weights */
    static const char *const files[] = {"tiny-gpt2-f32.gguf", "tiny-gpt2-v2.gguf"};
    for (size_t k = 0; k < 2; k++) {
        char path[256];
        snprintf(path, sizeof path, GOOD "%s", files[k]);
        hs_model *back = tu_load_converted(path);
        cr_assert_eq(back->decoder, back->wte, "%s: the head must stay tied", files[k]);
        cr_assert_eq(model_diff(hf, back, 0), 0.0);
        cr_assert_eq(hs_model_param_count(back), hs_model_param_count(hf), "%s", files[k]);
        hs_model_free(back);
    }
    hs_model *back = tu_load_converted(mine);
    cr_assert_eq(back->decoder, back->wte);
    hs_model_free(back);
    tu_rm_rf(dir);
    hs_model_free(hf);
}

/* The string of id in g's tokenizer.ggml.tokens. */
static const char *gguf_token(const hs_gguf *g, size_t id)
{
    long i = hs_gguf_find_kv(g, "tokenizer.ggml.tokens");
    cr_assert_geq(i, 0);
    hs_gguf_value v;
    cr_assert_eq(hs_gguf_kv_get(g, (size_t)i, id, &v), HS_OK);
    return v.str;
}

static int64_t gguf_int(const hs_gguf *g, const char *key, size_t j)
{
    long i = hs_gguf_find_kv(g, key);
    cr_assert_geq(i, 0, "no %s", key);
    hs_gguf_value v;
    cr_assert_eq(hs_gguf_kv_get(g, (size_t)i, j, &v), HS_OK);
    return v.type == HS_GGUF_INT32 ? v.i : (int64_t)v.u;
}

Test(gguf, bert_bracketed_tokens_are_written_and_read_back_verbatim)
{
    hs_model *hf = tu_load_converted("fixtures/tiny-bert");
    unsigned char *buf = NULL;
    hs_gguf *g = encode_parse(hf, NULL, &buf);
    /* the bert-base-uncased vocabulary as llama.cpp's converter and its
     * ggml-vocab-bert-bge.gguf store it: ids from vocab.txt's line numbers */
    static const struct {
        size_t id;
        const char *tok;
        int type;
    } want[] = {{0, "[PAD]", 3},         {1, "[unused0]", 1},   {99, "[unused98]", 1},
                {100, "[UNK]", 3},       {101, "[CLS]", 3},     {102, "[SEP]", 3},
                {103, "[MASK]", 3},      {104, "[unused99]", 1}, {998, "[unused993]", 1},
                {999, "\xe2\x96\x81!", 1}, {1031, "\xe2\x96\x81[", 1}, {1996, "\xe2\x96\x81the", 1},
                {2075, "ing", 1}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        cr_assert_str_eq(gguf_token(g, want[k].id), want[k].tok, "id %zu", want[k].id);
        cr_assert_eq(gguf_int(g, "tokenizer.ggml.token_type", want[k].id), want[k].type, "id %zu", want[k].id);
    }
    cr_assert_eq(hs_gguf_find_kv(g, "tokenizer.ggml.eos_token_id"), -1,
                 "llama.cpp would take [SEP] for an end-of-generation token");
    cr_assert_eq(gguf_int(g, "tokenizer.ggml.bos_token_id", 0), 101);
    cr_assert_eq(gguf_int(g, "tokenizer.ggml.seperator_token_id", 0), 102);
    hs_gguf_free(g);

    /* read back: every token string is the folder's */
    char dir[64], path[128];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    hs_error err = {{0}};
    hs_model *back = NULL;
    cr_assert_eq(hs_gguf_write(hf, path, NULL, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hs_model_open(path, HS_OPEN_TOKENIZER, &back, &err), HS_OK, "%s", err.msg);
    const hs_tokenizer *a = hs_model_tokenizer(hf), *b = hs_model_tokenizer(back);
    cr_assert_eq(hs_tokenizer_vocab_size(a), hs_tokenizer_vocab_size(b));
    for (int32_t id = 0; id < (int32_t)hs_tokenizer_vocab_size(a); id++)
        cr_assert_str_eq(hs_tokenizer_token(b, id), hs_tokenizer_token(a, id), "id %d", id);
    cr_assert_str_eq(hs_tokenizer_token(b, 1), "[unused0]");
    hs_model_free(back);
    tu_rm_rf(dir);
    free(buf);
    hs_model_free(hf);
}

/* The ids of text in a model opened with flags. */
static void expect_ids_open(const char *path, unsigned flags, const char *text,
                            const int32_t *want, size_t n)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_open(path, flags, &m, &err), HS_OK, "%s: %s", path, err.msg);
    expect_ids(m, text, want, n);
    hs_model_free(m);
}

Test(gguf, vocabulary_only_files_serve_tokenize_and_info)
{
    /* fixtures/gguf/tiny-bert-vocab/vocab.txt, ids counted by hand: [CLS] 4, hello 19, ',' 10,
     * the 11, cat 12, ##s 21, ! 25, [SEP] 5; un 16 ##aff 17 ##able 18, play 24 ##ing 23,
     * [MASK] 6, '[' 7, "unused0" has no split into pieces: [UNK] 3, ']' 8 */
    static const int32_t cats[] = {4, 19, 10, 11, 12, 21, 25, 5};
    static const int32_t unaff[] = {4, 16, 17, 18, 24, 23, 6, 7, 3, 8, 5};
    const char *vb = GOOD "tiny-bert-vocab.gguf";
    for (unsigned flags = HS_OPEN_NO_WEIGHTS; flags <= HS_OPEN_TOKENIZER; flags++) {
        expect_ids_open(vb, flags, "Hello, the cats!", cats, 8);
        expect_ids_open(vb, flags, "unaffable playing [MASK] [unused0]", unaff, 11);
    }
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_open(vb, HS_OPEN_NO_WEIGHTS, &m, &err), HS_OK, "%s", err.msg);
    const hs_model_config *c = hs_model_config_of(m);
    cr_assert(c->family == HS_FAMILY_BERT && c->n_layer == 1 && c->d_model == 8 &&
              c->vocab_size == 27 && c->type_vocab_size == 2 && c->has_lm_head == 0);
    cr_assert_eq(hs_model_param_count(m), 0);
    cr_assert_str_eq(hs_model_storage_dtype(m), "none");
    cr_assert_eq(hs_model_has_weights(m), 0);
    const hs_tokenizer *t = hs_model_tokenizer(m);
    cr_assert_str_eq(hs_tokenizer_token(t, 1), "[unused0]");
    cr_assert_str_eq(hs_tokenizer_token(t, 21), "##s");
    cr_assert_str_eq(hs_tokenizer_token(t, 22), "s");
    hs_model_free(m);

    /* the GPT-2 one tokenizes as its folder does */
    hs_model *folder = tu_load_converted(TINY_HF), *v = NULL;
    cr_assert_eq(hs_model_open(GOOD "tiny-gpt2-vocab.gguf", HS_OPEN_TOKENIZER, &v, &err), HS_OK,
                 "%s", err.msg);
    expect_same_ids(folder, v, "Hello world, the world in a <|endoftext|> Ünïcödé");
    hs_model_free(v);
    hs_model_free(folder);

    /* the forward pass needs weights: refused with a message, nothing returned */
    m = (hs_model *)1;
    cr_assert_eq(hs_model_load(vb, &m, &err), HS_E_UNSUPPORTED);
    cr_assert_null(m);
    cr_assert_not_null(strstr(err.msg, "no tensors"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "tiny-bert-vocab.gguf"), "%s", err.msg);
}

Test(gguf, bert_continuation_of_a_bracketed_token_is_refused)
{
    char dir[64], cmd[512];
    make_folder(dir, sizeof dir, "bert-legacy", 1);
    /* "##[unused0]" would be stored as "[unused0]" and read back without its ## */
    snprintf(cmd, sizeof cmd, "sed -i '2s/.*/##[unused0]/' '%s/vocab.txt'", dir);
    cr_assert_eq(system(cmd), 0);
    hs_model *hf = tu_load_converted(dir);
    unsigned char *buf = NULL;
    size_t n = 0;
    hs_error err = {{0}};
    cr_assert_eq(hs_gguf_encode(hf, NULL, &buf, &n, &err), HS_E_UNSUPPORTED);
    cr_assert_null(buf);
    cr_assert_not_null(strstr(err.msg, "token 1 '##[unused0]' cannot be stored"), "%s", err.msg);
    hs_model_free(hf);
    tu_rm_rf(dir);
}
