/* Composition scores between heads and OV copying scores, from the weights (Elhage et al.
 * 2021). Every norm is taken in the factored form: with W_OV^a = V_a O_a (V_a: (d, dh),
 * O_a: (dh, d)) and W_QK^b = Q_b K_b^T,
 *   ||W_OV^a W_QK^b||^2   = tr(M^T Gv_a M Gk_b),  M = O_a Q_b  (dh, dh)
 *   ||W_OV^a W_QK^b^T||^2 = tr(M^T Gv_a M Gq_b),  M = O_a K_b
 *   ||W_OV^a W_OV^b||^2   = tr(M^T Gv_a M Go_b),  M = O_a V_b
 * with the Gram matrices Gv = V^T V, Gq = Q^T Q, Gk = K^T K, Go = O O^T (dh, dh), so no
 * (d, d) matrix per head is ever formed. M for every head pair of two layers is one
 * (d, d) product W_O^la R_lb. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "headscope/composition.h"
#include "internal.h"
#include "model/model_internal.h"

/* LAPACK's general eigenvalue solver (OpenBLAS ships it). */
void dgeev_(const char *jobvl, const char *jobvr, const int *n, double *a, const int *lda,
            double *wr, double *wi, double *vl, const int *ldvl, double *vr, const int *ldvr,
            double *work, const int *lwork, int *info);

void hs_composition_free(hs_composition *c)
{
    free(c);
}

/* The reading weights of layer l, part p (0 Q, 1 K, 2 V), with ln_1's scale folded in:
 * out: (d, d) row-major, column h*dh + j is head h's j-th column. */
static void reader(const hs_model *m, int l, int p, double *out)
{
    int d = m->cfg.d_model;
    const hs_layer *ly = &m->layers[l];
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++)
            out[(size_t)i * d + j] =
                (double)ly->ln1_w[i] * (double)ly->w_qkv[(size_t)i * 3 * d + (size_t)p * d + j];
}

/* g: (dh, dh) = X^T X for the columns c0..c0+dh-1 of x: (d, ld). */
static void gram_cols(const double *x, int d, int ld, int c0, int dh, double *g)
{
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dh, dh, d, 1.0, x + c0, ld, x + c0, ld,
                0.0, g, dh);
}

static double trace_prod(const double *a, const double *b, int n) /* tr(A B) */
{
    double s = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            s += a[(size_t)i * n + j] * b[(size_t)j * n + i];
    return s;
}

hs_status hs_composition_compute(const hs_model *m, hs_composition **out, hs_error *err)
{
    *out = NULL;
    const hs_model_config *c = &m->cfg;
    if (c->family != HS_FAMILY_GPT2)
        return hs_fail(err, HS_E_UNSUPPORTED,
                       "composition scores are defined for the GPT-2 family (pre-LN); %s "
                       "renormalises the residual stream after every sublayer",
                       hs_family_name(c->family));
    if (!m->has_weights)
        return hs_fail(err, HS_E_ARG, "composition: the model was opened without weights");
    hs_status st = HS_OK;
    int L = c->n_layer, H = c->n_head, d = c->d_model, dh = c->d_head, N = L * H;
    size_t dd = (size_t)d * d, g2 = (size_t)dh * dh, nn = (size_t)N * N;
    size_t total = sizeof(hs_composition) + (3 * nn + 3 * (size_t)N) * sizeof(double);
    hs_composition *r = calloc(1, total);
    /* scratch: Gram matrices Gq, Gk, Gv, Go per head; W_O, a reader, M, T, U (d, d); and
     * the copying circuit's G (d, d) */
    double *gram = malloc(4 * (size_t)N * g2 * sizeof *gram);
    double *wo = malloc(dd * sizeof *wo), *rd = malloc(dd * sizeof *rd);
    double *mm = malloc(dd * sizeof *mm), *tt = malloc(dd * sizeof *tt);
    double *uu = malloc(dd * sizeof *uu);
    if (!r || !gram || !wo || !rd || !mm || !tt || !uu) {
        free(r);
        r = NULL;
        st = hs_fail(err, HS_E_NOMEM, "composition: out of memory for %d heads of d_model %d", N,
                     d);
        goto done;
    }
    r->n_layer = L;
    r->n_head = H;
    r->n_heads = N;
    r->q = (double *)(r + 1);
    r->k = r->q + nn;
    r->v = r->k + nn;
    r->copying = r->v + nn;
    r->ov_norm = r->copying + N;
    r->qk_norm = r->ov_norm + N;
    for (size_t i = 0; i < 3 * nn; i++)
        r->q[i] = NAN;
#define GRAM(kind, head) (gram + ((size_t)(kind) * N + (size_t)(head)) * g2)
    for (int l = 0; l < L; l++) {
        for (int p = 0; p < 3; p++) {
            reader(m, l, p, rd);
            for (int h = 0; h < H; h++)
                gram_cols(rd, d, d, h * dh, dh, GRAM(p, l * H + h));
        }
        for (size_t i = 0; i < dd; i++)
            wo[i] = (double)m->layers[l].w_o[i];
        for (int h = 0; h < H; h++) /* Go = O O^T: rows h*dh.. of W_O */
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, dh, dh, d, 1.0,
                        wo + (size_t)h * dh * d, d, wo + (size_t)h * dh * d, d, 0.0,
                        GRAM(3, l * H + h), dh);
        for (int h = 0; h < H; h++) {
            int a = l * H + h;
            r->ov_norm[a] = sqrt(fmax(0.0, trace_prod(GRAM(2, a), GRAM(3, a), dh)));
            r->qk_norm[a] = sqrt(fmax(0.0, trace_prod(GRAM(0, a), GRAM(1, a), dh)));
        }
    }
    for (int la = 0; la < L; la++) {
        for (size_t i = 0; i < dd; i++)
            wo[i] = (double)m->layers[la].w_o[i];
        for (int lb = la + 1; lb < L; lb++) {
            for (int mode = 0; mode < 3; mode++) { /* 0 Q, 1 K, 2 V: the reader of head b */
                static const int other[3] = {1, 0, 3}; /* Gk, Gq, Go on the far side */
                double *dst = mode == 0 ? r->q : mode == 1 ? r->k : r->v;
                reader(m, lb, mode, rd);
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d, d, d, 1.0, wo, d, rd, d,
                            0.0, mm, d); /* M: (d, d), block (a, b) = O_a R_b */
                for (int h = 0; h < H; h++) /* T = blockdiag(Gv_a) M */
                    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, dh, d, dh, 1.0,
                                GRAM(2, la * H + h), dh, mm + (size_t)h * dh * d, d, 0.0,
                                tt + (size_t)h * dh * d, d);
                for (int h = 0; h < H; h++) /* U = T blockdiag(G_b) */
                    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d, dh, dh, 1.0,
                                tt + (size_t)h * dh, d, GRAM(other[mode], lb * H + h), dh, 0.0,
                                uu + (size_t)h * dh, d);
                for (int ha = 0; ha < H; ha++)
                    for (int hb = 0; hb < H; hb++) {
                        double s = 0;
                        for (int i = ha * dh; i < (ha + 1) * dh; i++)
                            for (int j = hb * dh; j < (hb + 1) * dh; j++)
                                s += mm[(size_t)i * d + j] * uu[(size_t)i * d + j];
                        int a = la * H + ha, b = lb * H + hb;
                        double nb = mode == 2 ? r->ov_norm[b] : r->qk_norm[b];
                        double den = r->ov_norm[a] * nb;
                        dst[(size_t)a * N + b] = den > 0 ? sqrt(fmax(0.0, s)) / den : NAN;
                    }
            }
        }
    }
    /* copying: eigenvalues of O_a G V_a with G = diag(ln_f) W_U W_E = diag(ln_f) dec^T wte */
    {
        float *gf = malloc(dd * sizeof *gf);
        int n = dh, lwork = 8 * dh, info = 0;
        double *cm = malloc(g2 * sizeof *cm), *wr = malloc(2 * (size_t)dh * sizeof *wr);
        double *work = malloc((size_t)lwork * sizeof *work);
        if (!gf || !cm || !wr || !work) {
            free(gf);
            free(cm);
            free(wr);
            free(work);
            free(r);
            r = NULL;
            st = hs_fail(err, HS_E_NOMEM, "composition: out of memory");
            goto done;
        }
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, d, c->vocab_size, 1.0f,
                    m->decoder, d, m->wte, d, 0.0f, gf, d);
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++)
                mm[(size_t)i * d + j] = (double)m->lnf_w[i] * (double)gf[(size_t)i * d + j];
        free(gf);
        for (int l = 0; l < L && !info; l++) {
            for (size_t i = 0; i < dd; i++)
                wo[i] = (double)m->layers[l].w_o[i];
            reader(m, l, 2, rd);
            /* T = W_O G: (d, d), rows h*dh.. are O_h G */
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d, d, d, 1.0, wo, d, mm, d, 0.0,
                        tt, d);
            for (int h = 0; h < H && !info; h++) {
                /* cm = O_h G V_h, row-major; dgeev reads its transpose, which has the
                   same eigenvalues */
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, dh, dh, d, 1.0,
                            tt + (size_t)h * dh * d, d, rd + (size_t)h * dh, d, 0.0, cm, dh);
                dgeev_("N", "N", &n, cm, &n, wr, wr + dh, NULL, &n, NULL, &n, work, &lwork,
                       &info);
                double sum = 0, mag = 0;
                for (int i = 0; i < dh; i++) {
                    sum += wr[i];
                    mag += hypot(wr[i], wr[dh + i]);
                }
                r->copying[l * H + h] = mag > 0 ? sum / mag : NAN;
            }
        }
        free(cm);
        free(wr);
        free(work);
        if (info) {
            free(r);
            r = NULL;
            st = hs_fail(err, HS_E_VALUE, "composition: the eigenvalue solver failed (info %d)",
                         info);
            goto done;
        }
    }
#undef GRAM
done:
    free(gram);
    free(wo);
    free(rd);
    free(mm);
    free(tt);
    free(uu);
    *out = r;
    return st;
}

int hs_composition_strongest(const hs_composition *cp, int kind, int *from, int *to, int max)
{
    const double *s = kind == 0 ? cp->q : kind == 1 ? cp->k : cp->v;
    int N = cp->n_heads, n = 0;
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++) {
            double v = s[(size_t)a * N + b];
            if (!(v == v))
                continue;
            int at = n < max ? n++ : max; /* insertion into a descending list */
            if (at == max && !(v > s[(size_t)from[max - 1] * N + to[max - 1]]))
                continue;
            if (at == max)
                at = max - 1;
            while (at > 0 && v > s[(size_t)from[at - 1] * N + to[at - 1]]) {
                from[at] = from[at - 1];
                to[at] = to[at - 1];
                at--;
            }
            from[at] = a;
            to[at] = b;
        }
    return n;
}
