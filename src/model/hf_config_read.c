/* config.json's field readers (model/hf_config.h): integers, numbers, booleans, strings and
 * activations, each message naming the field. */
#include <math.h>
#include <string.h>

#include <cJSON.h>

#include "model/hf_config.h"

/* Reads an integer field. required: a missing field is an error; else *out keeps its default. */
hs_status hs_cfg_int(const cJSON *root, const char *key, int required, int *out, hs_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) {
        if (required)
            return hs_fail(err, HS_E_FORMAT, "config.json: missing required field '%s'", key);
        return HS_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 ||
        v->valuedouble > HS_CFG_INT_MAX)
        return hs_fail(err, HS_E_FORMAT, "config.json: field '%s' must be a non-negative integer",
                       key);
    *out = (int)v->valuedouble;
    return HS_OK;
}

hs_status hs_cfg_unit(const cJSON *root, const char *key, float *out, hs_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v))
        return HS_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble <= 0 || v->valuedouble > 1)
        return hs_fail(err, HS_E_FORMAT, "config.json: field '%s' must be a number in (0, 1]", key);
    *out = (float)v->valuedouble;
    return HS_OK;
}

const char *hs_cfg_str(const cJSON *root, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A boolean field that must have the given value for headscope to compute the same thing
 * as transformers (absent = transformers' default). */
hs_status hs_cfg_require(const cJSON *root, const char *key, int want, hs_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v))
        return HS_OK;
    if (!cJSON_IsBool(v))
        return hs_fail(err, HS_E_FORMAT, "config.json: field '%s' must be true or false", key);
    if (cJSON_IsTrue(v) != want)
        return hs_fail(err, HS_E_UNSUPPORTED, "config.json: '%s': %s is not supported", key,
                       want ? "false" : "true");
    return HS_OK;
}

hs_status hs_cfg_act(const char *name, hs_activation *act, hs_error *err)
{
    if (!name)
        return HS_OK;
    if (!strcmp(name, "gelu_new") || !strcmp(name, "gelu_pytorch_tanh"))
        *act = HS_ACT_GELU_TANH;
    else if (!strcmp(name, "gelu"))
        *act = HS_ACT_GELU_ERF;
    else
        return hs_fail(err, HS_E_UNSUPPORTED,
                       "config.json: activation '%s' is not supported (expected gelu_new, "
                       "gelu_pytorch_tanh or gelu)", name);
    return HS_OK;
}

/* A number field in [lo, hi]; absent or null leaves *out alone. */
hs_status hs_cfg_num(const cJSON *obj, const char *where, const char *key, double lo,
                     double hi, double *out, hs_error *err)
{
    const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
    if (!v || cJSON_IsNull(v))
        return HS_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > hi)
        return hs_fail(err, HS_E_FORMAT, "config.json: %s'%s' must be a number in [%g, %g]",
                       where, key, lo, hi);
    *out = v->valuedouble;
    return HS_OK;
}

/* A boolean field into *out; absent or null leaves *out alone. */
hs_status hs_cfg_bool(const cJSON *root, const char *key, int *out, hs_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v))
        return HS_OK;
    if (!cJSON_IsBool(v))
        return hs_fail(err, HS_E_FORMAT, "config.json: field '%s' must be true or false", key);
    *out = cJSON_IsTrue(v);
    return HS_OK;
}
