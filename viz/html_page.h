/* The static text of out/index.html (viz/html_page.c), used by viz/html.c. */
#ifndef HEADSCOPE_VIZ_HTML_PAGE_H
#define HEADSCOPE_VIZ_HTML_PAGE_H

/* Each is a NULL-terminated list of lines, each ending in '\n'; the page is
 * hs_html_head, hs_html_css, hs_html_body, the data scripts, then hs_html_js
 * inside a <script> element. */
extern const char *const hs_html_head[];
extern const char *const hs_html_css[];
extern const char *const hs_html_body[];
extern const char *const hs_html_js[];

#endif /* HEADSCOPE_VIZ_HTML_PAGE_H */
