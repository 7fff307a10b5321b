"""Report: the dict of report.json, with the page of `headscope analyze` for notebooks."""
import html


class Report(dict):
    """report.json as a dict (docs/report-schema.md), as Model.analyze returns it. From
    Model.show or Model.analyze(..., out_dir=...) it also holds .page, the self-contained
    HTML page `headscope analyze` writes (docs/html.md): a notebook shows it inline
    (_repr_html_), nothing loaded from the network. .out_dir: the folder written, or None."""

    page = None
    out_dir = None
    height = 900  # pixels of the inline frame

    def _repr_html_(self):
        """The head view inline: the whole page in an iframe's srcdoc (its CSS and
        JavaScript stay inside it and cannot touch the notebook's). None without a page (a
        notebook then shows the dict)."""
        if self.page is None:
            return None
        return ('<iframe title="headscope report" srcdoc="%s" style="width: 100%%; '
                'height: %dpx; border: 1px solid #ccc;"></iframe>'
                % (html.escape(self.page, quote=True), int(self.height)))

    def save_page(self, path):
        """Writes the page to path (an index.html to open in a browser)."""
        if self.page is None:
            raise ValueError("this report has no page: use Model.show(text) or "
                             "Model.analyze(text, out_dir=...)")
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.page)
