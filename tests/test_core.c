/* Core helpers: message escaping (hand-computed cases); SHA-256 against the FIPS 180-4 / NIST example vectors, and against
 * coreutils' sha256sum on committed files; the version strings. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "headscope/model.h"
#include "headscope/version.h"
#include "testutil.h"

static void digest_of(const void *data, size_t n, char hex[65])
{
    hs_sha256_ctx s;
    hs_sha256_init(&s);
    hs_sha256_update(&s, data, n);
    hs_sha256_final(&s, hex);
}

Test(sha256, nist_vectors)
{
    char hex[65];
    digest_of("", 0, hex);
    cr_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    digest_of("abc", 3, hex);
    cr_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    digest_of(two, strlen(two), hex);
    cr_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

/* The x86 SHA-extension compression against the portable one, state for state, on 1 to 40
 * pseudo-random blocks from several starting states (where the CPU has the extensions; the
 * NIST vectors above already run through it, as every digest does). */
Test(sha256, accelerated_blocks_match_portable)
{
    static unsigned char data[40 * 64];
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < sizeof data; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        data[i] = (unsigned char)x;
    }
    uint32_t probe[8] = {0};
    if (!hs_sha256_blocks_accel(probe, data, 1)) {
        /* an info line, not a warning: Criterion 2.4 exits 1 when a test logs a warning */
        cr_log_info("this CPU has no SHA extensions: only the portable compression is tested");
        return;
    }
    for (size_t nb = 1; nb <= 40; nb += 3)
        for (int start = 0; start < 3; start++) {
            uint32_t a[8], b[8];
            for (int i = 0; i < 8; i++)
                a[i] = b[i] = (uint32_t)(0x6a09e667u * (unsigned)(i + 1) + 0x9e3779b9u * (unsigned)start);
            hs_sha256_blocks_generic(a, data + 64 * (size_t)start, nb - (size_t)start % nb);
            cr_assert(hs_sha256_blocks_accel(b, data + 64 * (size_t)start, nb - (size_t)start % nb));
            cr_assert_arr_eq(a, b, sizeof a, "%zu blocks from state %d", nb, start);
        }
}

/* One million 'a' fed in uneven pieces (1, 63, 64, 65, ... bytes) exercises every path of
 * the block buffer. */
Test(sha256, million_a_in_uneven_pieces)
{
    static char a[1000];
    memset(a, 'a', sizeof a);
    hs_sha256_ctx s;
    hs_sha256_init(&s);
    size_t left = 1000000, step = 1;
    while (left) {
        size_t k = step < left ? step : left;
        k = k < sizeof a ? k : sizeof a;
        hs_sha256_update(&s, a, k);
        left -= k;
        step = step * 7 % 997 + 1;
    }
    char hex[65];
    hs_sha256_final(&s, hex);
    cr_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* The files hs_model_files_hash lists for the model folder dir (opened without weights),
 * each digest checked against coreutils' sha256sum; *n entries, free with
 * hs_model_files_free. */
static hs_model_file *files_checked(const char *dir, int *n)
{
    hs_model *m = NULL;
    hs_error err = {{0}};
    cr_assert_eq(hs_model_open(dir, HS_OPEN_NO_WEIGHTS, &m, &err), HS_OK, "%s", err.msg);
    hs_model_file *f = NULL;
    cr_assert_eq(hs_model_files_hash(m, &f, n, &err), HS_OK, "%s", err.msg);
    for (int i = 0; i < *n; i++) {
        char cmd[256], line[256] = "";
        snprintf(cmd, sizeof cmd, "sha256sum %s/%s", dir, f[i].name);
        FILE *p = popen(cmd, "r");
        cr_assert_not_null(p);
        cr_assert_not_null(fgets(line, sizeof line, p));
        pclose(p);
        cr_assert_eq(strncmp(line, f[i].sha256, 64), 0, "%s: %s vs %.64s", f[i].name, f[i].sha256,
                     line);
    }
    hs_model_free(m);
    return f;
}

/* The digest of every file of a model folder equals coreutils' sha256sum. */
Test(sha256, model_files_match_sha256sum)
{
    int n = 0;
    hs_model_file *f = files_checked("fixtures/trained-gpt2", &n);
    cr_assert_eq(n, 4, "config.json, model.safetensors, vocab.json, merges.txt");
    cr_assert_str_eq(f[0].name, "config.json");
    cr_assert_str_eq(f[1].name, "model.safetensors");
    cr_assert_eq(f[1].bytes, 14523016u);
    hs_model_files_free(f, n);
}

/* A sharded checkpoint: the index, then the shards the loader read, each once and sorted by
 * name although the index names model-00002 first; digests as sha256sum gives them. */
Test(sha256, sharded_checkpoint_hashes_its_shards_by_name)
{
    int n = 0;
    hs_model_file *f = files_checked("fixtures/family-models/tiny-llama", &n);
    static const char *const want[] = {"config.json", "model.safetensors.index.json",
                                       "model-00001-of-00002.safetensors",
                                       "model-00002-of-00002.safetensors", "tokenizer.json"};
    cr_assert_eq(n, 5);
    for (int i = 0; i < n; i++)
        cr_assert_str_eq(f[i].name, want[i]);
    hs_model_files_free(f, n);
}

Test(version, release_string_matches_the_header)
{
    cr_assert_str_eq(hs_version(), HS_VERSION);
    const char *c = hs_build_commit();
    cr_assert_not_null(c);
    /* "" outside git, else 12 hex digits with an optional -dirty */
    if (*c) {
        cr_assert_geq(strlen(c), 12u);
        for (int i = 0; i < 12; i++)
            cr_assert(strchr("0123456789abcdef", c[i]), "%s", c);
    }
}

/* Hand-computed escapes: C0, DEL, C1, invalid UTF-8; printable UTF-8 unchanged. */
Test(text_escape, controls_c1_and_invalid_bytes)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain 'gpt2'", "plain 'gpt2'"},
        {"a\nb\r\tc", "a\\nb\\r\\tc"},
        {"\x1b[31mred", "\\x1b[31mred"},
        {"del\x7f", "del\\x7f"},
        {"csi \xc2\x9b and nel \xc2\x85", "csi \\u009b and nel \\u0085"},
        {"nbsp \xc2\xa0 caf\xc3\xa9 \xe6\x9d\xb1 \xf0\x9f\x98\x80", "nbsp \xc2\xa0 caf\xc3\xa9 \xe6\x9d\xb1 \xf0\x9f\x98\x80"},
        {"lone \x9b, cut \xe6\x9d, overlong \xc0\xaf", "lone \\x9b, cut \\xe6\\x9d, overlong \\xc0\\xaf"},
        {"surrogate \xed\xa0\x80", "surrogate \\xed\\xa0\\x80"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[128];
        size_t n = hs_text_escape(out, sizeof out, cases[i].in);
        cr_expect_str_eq(out, cases[i].out, "case %zu", i);
        cr_expect_eq(n, strlen(cases[i].out), "case %zu", i);
    }
}

Test(text_escape, stops_whole_at_the_capacity)
{
    char out[8];
    cr_expect_eq(hs_text_escape(out, sizeof out, "abc\ndef"), 7);
    cr_expect_str_eq(out, "abc\\nde");
    cr_expect_eq(hs_text_escape(out, 6, "ab\x1b"), 2); /* "\x1b" does not fit: nothing of it */
    cr_expect_str_eq(out, "ab");
    cr_expect_eq(hs_text_escape(out, 5, "ab\xe6\x9d\xb1z"), 2); /* nor half a character */
    cr_expect_str_eq(out, "ab");
}

/* hs_fail keeps every library message one line */
Test(text_escape, library_messages_are_escaped)
{
    hs_error err = {{0}};
    hs_fail(&err, HS_E_FORMAT, "model_type '%s' is not supported", "x\n\x1b[2J");
    cr_expect_str_eq(err.msg, "model_type 'x\\n\\x1b[2J' is not supported");
}

/* ---- resumable output files (hs_out_reopen, hs_out_resume, hs_out_keep) ------------------- */

Test(tmpfile, kept_file_is_reopened_cut_to_its_length_and_committed)
{
    char dir[] = "/tmp/hs-core-XXXXXX", path[128], tmp[160];
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/texts.jsonl", dir);
    hs_out o;
    hs_error err = {{0}};
    cr_assert_eq(hs_out_open(path, &o, &err), HS_OK, "%s", err.msg);
    snprintf(tmp, sizeof tmp, "%s", o.tmp);
    fputs("line 1\nline 2\npartial", o.f);
    hs_out_keep(&o); /* an interrupted run: the temporary file stays */
    cr_assert_eq(access(tmp, F_OK), 0);
    cr_assert_neq(access(path, F_OK), 0);
    cr_assert_eq(hs_out_reopen(path, tmp, 99, &o, &err), HS_E_IO, "longer than the file");
    cr_assert(strstr(err.msg, "at least 99 bytes"), "%s", err.msg);
    cr_assert_eq(hs_out_reopen(path, tmp, 14, &o, &err), HS_OK, "%s", err.msg);
    fputs("line 3\n", o.f);
    cr_assert_eq(hs_out_close(&o, 1, &err), HS_OK, "%s", err.msg);
    FILE *f = fopen(path, "rb");
    char buf[64] = {0};
    cr_assert(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    cr_assert_eq(n, 21);
    cr_assert_str_eq(buf, "line 1\nline 2\nline 3\n");
    cr_assert_neq(access(tmp, F_OK), 0, "renamed");
    /* a link in the temporary file's place is not followed */
    cr_assert_eq(symlink(path, tmp), 0);
    cr_assert_eq(hs_out_reopen(path, tmp, 0, &o, &err), HS_E_IO);
    unlink(tmp);
    unlink(path);
    rmdir(dir);
}

/* file's bytes as a string (tu_slurp), its length checked */
static void file_is(const char *path, const char *want)
{
    size_t n;
    char *got = tu_slurp(path, &n);
    cr_assert_eq(n, strlen(want), "%s: %zu bytes", path, n);
    cr_assert_str_eq(got, want, "%s", path);
    free(got);
}

Test(tmpfile, resume_copies_the_prefix_into_a_new_file_and_counts_its_lines)
{
    char dir[64], path[128], tmp[160];
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/texts.jsonl", dir);
    hs_out o;
    hs_error err = {{0}};
    long lines = 99;
    cr_assert_eq(hs_out_open(path, &o, &err), HS_OK, "%s", err.msg);
    snprintf(tmp, sizeof tmp, "%s", o.tmp);
    fputs("line 1\nline 2\npartial", o.f); /* 21 bytes, the checkpoint at 14 */
    hs_out_keep(&o);
    cr_assert_eq(hs_out_resume(path, tmp, 99, &o, &lines, &err), HS_E_INPUT, "longer than the file");
    cr_assert(strstr(err.msg, "at least 99 bytes"), "%s", err.msg);
    cr_assert_eq(hs_out_resume(path, tmp, 17, &o, &lines, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(lines, -1, "17 bytes end inside 'partial'");
    hs_out_close(&o, 0, NULL);
    cr_assert_eq(hs_out_resume(path, tmp, 14, &o, &lines, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(lines, 2);
    cr_assert_str_neq(o.tmp, tmp, "a new temporary file");
    fputs("line 3\n", o.f);
    cr_assert_eq(hs_out_close(&o, 1, &err), HS_OK, "%s", err.msg);
    file_is(path, "line 1\nline 2\nline 3\n");
    file_is(tmp, "line 1\nline 2\npartial"); /* the old file is only read */
    cr_assert_eq(hs_out_resume(path, tmp, 0, &o, &lines, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(lines, 0);
    hs_out_close(&o, 0, NULL);
    tu_rm_rf(dir);
}

Test(tmpfile, resume_and_reopen_refuse_a_hard_link_to_another_file)
{
    char dir[64], path[128], tmp[160], victim[160];
    const char *theirs = "someone else's\nfile\n";
    tu_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/texts.jsonl", dir);
    snprintf(tmp, sizeof tmp, "%s/texts.jsonl.tmp-Ab12Cd", dir);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    tu_write_file(victim, theirs, strlen(theirs));
    cr_assert_eq(link(victim, tmp), 0);
    hs_out o;
    hs_error err = {{0}};
    long lines;
    cr_assert_eq(hs_out_resume(path, tmp, 5, &o, &lines, &err), HS_E_INPUT);
    cr_assert(strstr(err.msg, "has 2 names (a hard link"), "%s", err.msg);
    cr_assert_eq(hs_out_reopen(path, tmp, 5, &o, &err), HS_E_IO, "reopen would cut it to 5 bytes");
    cr_assert(strstr(err.msg, "one link"), "%s", err.msg);
    file_is(victim, theirs); /* the other file is unchanged */
    cr_assert_neq(access(path, F_OK), 0);
    tu_rm_rf(dir);
}

/* Every one of the 65,536 binary16 values against IEEE 754's definition of the format, in
 * double: (-1)^s 2^-24 m for exponent 0, (-1)^s 2^(e - 25) (1024 + m) otherwise, infinity
 * for exponent 31 with m = 0, and a NaN (the sign kept) with m != 0. */
Test(f16, every_half_decodes_to_its_ieee_value)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        int s = (int)(h >> 15), e = (int)(h >> 10 & 31), mant = (int)(h & 1023);
        double want = e == 0 ? ldexp(mant, -24) : e == 31 ? (mant ? NAN : INFINITY)
                                                        : ldexp(1024 + mant, e - 25);
        float got = hs_f16_to_f32((uint16_t)h), fast = hs_f16_to_f32_fast(h);
        int ok = isnan(want) ? isnan(got) && !!signbit(got) == (s != 0)
                             : (double)got == (s ? -want : want) && !!signbit(got) == (s != 0);
        bad += !ok || memcmp(&got, &fast, sizeof got) != 0;
    }
    cr_assert_eq(bad, 0, "%d halves decode wrong", bad);
}
