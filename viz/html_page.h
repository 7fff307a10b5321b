/* The static text of out/index.html: viz/page/ compiled in by viz/page/pagegen.c (the
 * generated $(BUILD)/gen/page.c), used by viz/html.c. */
#ifndef HEADSCOPE_VIZ_HTML_PAGE_H
#define HEADSCOPE_VIZ_HTML_PAGE_H

#include <stddef.h>

/* The page before and after its data (the report and map records), without a NUL. */
extern const unsigned char hs_page_before[], hs_page_after[];
extern const size_t hs_page_before_len, hs_page_after_len;

#endif /* HEADSCOPE_VIZ_HTML_PAGE_H */
