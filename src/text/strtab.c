/* Open-addressing hash tables: interned strings (vocabulary) and symbol pairs (BPE merges). */
#include <stdlib.h>
#include <string.h>

#include "text/text_internal.h"

static uint64_t hash_bytes(uint64_t h, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001B3ull;
    }
    return h;
}

static uint64_t hash2(const char *prefix, size_t plen, const char *s, size_t len)
{
    uint64_t h = hash_bytes(0xCBF29CE484222325ull, prefix, plen);
    h = hash_bytes(h, s, len);
    return h ^ (h >> 29);
}

static int entry_equals(const hs_strtab *t, int32_t e, const char *prefix, size_t plen,
                        const char *s, size_t len)
{
    if (t->len[e] != plen + len)
        return 0;
    const char *p = t->buf + t->off[e];
    return (plen == 0 || memcmp(p, prefix, plen) == 0) && (len == 0 || memcmp(p + plen, s, len) == 0);
}

int32_t hs_strtab_find2(const hs_strtab *t, const char *prefix, size_t plen, const char *s,
                        size_t len)
{
    if (t->slot_cap == 0)
        return -1;
    size_t mask = t->slot_cap - 1;
    for (size_t i = (size_t)hash2(prefix, plen, s, len) & mask;; i = (i + 1) & mask) {
        int32_t e = t->slots[i];
        if (e < 0)
            return -1;
        if (entry_equals(t, e, prefix, plen, s, len))
            return e;
    }
}

/* Puts entry e in the index, replacing an entry with equal content. */
static void index_entry(hs_strtab *t, int32_t e)
{
    size_t mask = t->slot_cap - 1;
    const char *s = t->buf + t->off[e];
    for (size_t i = (size_t)hash2(NULL, 0, s, t->len[e]) & mask;; i = (i + 1) & mask) {
        int32_t o = t->slots[i];
        if (o < 0 || entry_equals(t, o, NULL, 0, s, t->len[e])) {
            t->slots[i] = e;
            return;
        }
    }
}

static hs_status grow_index(hs_strtab *t)
{
    size_t cap = t->slot_cap ? t->slot_cap * 2 : 1024;
    int32_t *slots = malloc(cap * sizeof *slots);
    if (!slots)
        return HS_E_NOMEM;
    for (size_t i = 0; i < cap; i++)
        slots[i] = -1;
    free(t->slots);
    t->slots = slots;
    t->slot_cap = cap;
    for (size_t e = 0; e < t->n; e++) {
        /* re-adding in order keeps "last equal entry wins" */
        index_entry(t, (int32_t)e);
    }
    return HS_OK;
}

hs_status hs_tok_grow(void **p, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (need <= *cap)
        return HS_OK;
    size_t c = *cap ? *cap : first;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem)
            return HS_E_NOMEM;
        c *= 2;
    }
    void *q = realloc(*p, c * elem);
    if (!q)
        return HS_E_NOMEM;
    *p = q;
    *cap = c;
    return HS_OK;
}

hs_status hs_strtab_push(hs_strtab *t, const char *s, size_t len, int32_t *idx)
{
    if (t->n >= (size_t)INT32_MAX || len > UINT32_MAX || len > SIZE_MAX - t->buf_len - 1)
        return HS_E_NOMEM;
    void *buf = t->buf;
    if (hs_tok_grow(&buf, &t->buf_cap, t->buf_len + len + 1, 1, 4096) != HS_OK)
        return HS_E_NOMEM;
    t->buf = buf;
    if (t->n == t->n_cap) {
        size_t cap = t->n_cap ? t->n_cap * 2 : 256;
        size_t *off = realloc(t->off, cap * sizeof *off);
        if (!off)
            return HS_E_NOMEM;
        t->off = off;
        uint32_t *ln = realloc(t->len, cap * sizeof *ln);
        if (!ln)
            return HS_E_NOMEM;
        t->len = ln;
        t->n_cap = cap;
    }
    if ((t->n + 1) * 2 > t->slot_cap && grow_index(t) != HS_OK)
        return HS_E_NOMEM;
    if (len)
        memcpy(t->buf + t->buf_len, s, len);
    t->buf[t->buf_len + len] = '\0';
    t->off[t->n] = t->buf_len;
    t->len[t->n] = (uint32_t)len;
    t->buf_len += len + 1;
    index_entry(t, (int32_t)t->n);
    if (idx)
        *idx = (int32_t)t->n;
    t->n++;
    return HS_OK;
}

void hs_strtab_free(hs_strtab *t)
{
    if (!t)
        return;
    free(t->slots);
    free(t->len);
    free(t->off);
    free(t->buf);
    memset(t, 0, sizeof *t);
}

static size_t pair_slot(uint64_t key, size_t mask)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32 ^ h) & mask;
}

static hs_pair_entry *pair_find_slot(hs_pair_entry *slots, size_t cap, uint64_t key)
{
    size_t mask = cap - 1;
    for (size_t i = pair_slot(key, mask);; i = (i + 1) & mask)
        if (slots[i].key == key || slots[i].key == UINT64_MAX)
            return &slots[i];
}

hs_status hs_pairmap_put(hs_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t result)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1024;
        hs_pair_entry *slots = malloc(cap * sizeof *slots);
        if (!slots)
            return HS_E_NOMEM;
        for (size_t i = 0; i < cap; i++)
            slots[i].key = UINT64_MAX;
        for (size_t i = 0; i < m->cap; i++)
            if (m->slots[i].key != UINT64_MAX)
                *pair_find_slot(slots, cap, m->slots[i].key) = m->slots[i];
        free(m->slots);
        m->slots = slots;
        m->cap = cap;
    }
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    hs_pair_entry *e = pair_find_slot(m->slots, m->cap, key);
    if (e->key == UINT64_MAX)
        m->n++;
    e->key = key;
    e->rank = rank;
    e->result = result;
    return HS_OK;
}

const hs_pair_entry *hs_pairmap_get(const hs_pairmap *m, int32_t left, int32_t right)
{
    if (m->cap == 0 || left < 0 || right < 0)
        return NULL;
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    const hs_pair_entry *e = pair_find_slot(m->slots, m->cap, key);
    return e->key == key ? e : NULL;
}

void hs_pairmap_free(hs_pairmap *m)
{
    if (!m)
        return;
    free(m->slots);
    memset(m, 0, sizeof *m);
}
