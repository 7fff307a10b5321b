/* The patching page (hs_html_patching_encode / _write, headscope patch's index.html): the
 * report embedded once, escaped so that a "</script>" or "<!--" in it cannot end or break
 * its element, and parsing back to the same JSON; nothing from the network; the errors.
 * What the page shows is tests/browser_patch.py's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>
#include <criterion/criterion.h>

#include "headscope/html.h"

static const char *const REPORT =
    "{\"schema\": \"headscope.patching/1\", \"model\": \"m\", \"pairs_file\": "
    "\"a</script><!-- b\", \"method\": \"exact\", \"heads\": [{\"layer\": 0, \"head\": 1, "
    "\"effect\": -0.25, \"ci95\": [-0.5, 0], \"per_pair\": [1, 2]}]}";

static size_t count(const char *s, const char *what)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, what)); p++)
        n++;
    return n;
}

Test(html_patch, embeds_the_report_once_escaped)
{
    char *page = NULL;
    size_t len = 0;
    hs_error err = {{0}};
    cr_assert_eq(hs_html_patching_encode(REPORT, &page, &len, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(strlen(page), len);
    const char *open = "<script type=\"application/json\" id=\"hs-patching\">";
    cr_assert_eq(count(page, open), 1);
    cr_assert_eq(count(page, "a<\\/script>\\u003c!-- b"), 1, "the text's </ and <!-- escaped");
    cr_assert_eq(count(page, "<!--"), 0);
    cr_assert_eq(count(page, "http://") + count(page, "https://"), 0);
    /* the element's text parses to the report */
    const char *at = strstr(page, open) + strlen(open), *end = strstr(at, "</script>");
    cr_assert_not_null(end);
    char *data = strndup(at, (size_t)(end - at));
    cJSON *a = cJSON_Parse(data), *b = cJSON_Parse(REPORT);
    cr_assert(a && cJSON_Compare(a, b, 1), "the embedded report differs: %s", data);
    cJSON_Delete(a);
    cJSON_Delete(b);
    free(data);
    /* the page's own script is there, after the data */
    cr_assert_gt(count(end, "function headsView"), 0);
    free(page);
}

Test(html_patch, refuses_what_is_not_a_patching_report)
{
    char *page = (char *)1;
    size_t len = 1;
    hs_error err = {{0}};
    cr_assert_eq(hs_html_patching_encode(NULL, &page, &len, &err), HS_E_ARG);
    cr_assert_null(page);
    cr_assert_eq(hs_html_patching_encode(REPORT, NULL, &len, &err), HS_E_ARG);
    cr_assert_eq(hs_html_patching_encode("{not json", &page, &len, &err), HS_E_FORMAT);
    cr_assert_str_eq(err.msg, "patching page: the report is not JSON");
    cr_assert_eq(hs_html_patching_encode("{\"schema\": \"headscope.report/3\"}", &page, &len, &err),
                 HS_E_FORMAT);
    cr_assert_str_eq(err.msg, "patching page: the report has no \"schema\" headscope.patching/...");
    cr_assert_eq(hs_html_patching_encode("[1]", &page, &len, &err), HS_E_FORMAT);
    cr_assert_null(page);
    cr_assert_eq(len, 0);
}

Test(html_patch, writes_the_file_or_nothing)
{
    char dir[] = "/tmp/hs-html-patch-XXXXXX", path[64], bad[96];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/index.html", dir);
    snprintf(bad, sizeof bad, "%s/no/index.html", dir);
    hs_error err = {{0}};
    cr_assert_eq(hs_html_patching_write(path, REPORT, &err), HS_OK, "%s", err.msg);
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    cr_assert_gt(sb.st_size, 1000);
    cr_assert_eq(hs_html_patching_write(bad, REPORT, &err), HS_E_IO);
    cr_assert_eq(hs_html_patching_write(NULL, REPORT, &err), HS_E_ARG);
    cr_assert_eq(hs_html_patching_write(path, "{}", &err), HS_E_FORMAT);
    cr_assert_eq(stat(path, &sb), 0, "a refused report leaves the earlier page");
    remove(path);
    rmdir(dir);
}
