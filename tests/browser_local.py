"""Local (sliding-window) layers on the page (run by tests/browser_test.py): report.json's
model.layers marks each layer local (window W) or global. A page with local layers
underlines the chips and table cells of their heads (and no other), and, when the analysed
heads lie in both kinds of layer, its "layers" control (all / global only / local only)
filters the head types and clusters cards (checked against the report's heads of those
layers, as browser_numbers.py checks them unfiltered) and the model view (the tiles of the
other layers faded). A page without local layers has neither marks nor the control. The
header's layers line, the panel's attention line and the model view's "L1 w48" labels are
browser_numbers.py's checks."""
import browser_numbers as bn  # (which imports this module too: modules, not names)
from browser_util import by_css, check, view



# ---- model.layers as the page prints it (browser_numbers.py reads these) ------------------------
def is_local(m, layer):
    ls = m.get("layers") or []
    return layer < len(ls) and isinstance(ls[layer], dict) and ls[layer].get("attention") == "local"


def any_local(rep):
    co = rep.get("corpus")
    return any(is_local(rep["model"], h["layer"]) for h in (co["heads"] if co else rep["heads"]))


def layers_line(m):
    """The header's layers line: "local 0, 1 (window 48); global 2"; '' without a local layer."""
    wins, glob = {}, []
    for l, y in enumerate(m.get("layers") or []):
        if is_local(m, l):
            wins.setdefault(y.get("window"), []).append(str(l))
        else:
            glob.append(str(l))
    if not wins:
        return ""
    parts = [", ".join(ls) + (" (window %s)" % bn.js_num(w) if bn.is_num(w) else "") for w, ls in wins.items()]
    return "local " + ", ".join(parts) + ("; global " + ", ".join(glob) if glob else "")


def layer_label(rep, layer):
    """A layer's label in the model view: "L1 w48" for a local layer of a page with local layers."""
    y = (rep["model"].get("layers") or [{}] * (layer + 1))[layer]
    if not any_local(rep) or not is_local(rep["model"], layer):
        return "L%d" % layer
    return "L%d " % layer + ("w" + bn.js_num(y["window"]) if bn.is_num(y.get("window")) else "local")


def attention_line(rep, layer):
    """The head panel's attention line; None on a page without local layers."""
    if not any_local(rep):
        return None
    y = rep["model"]["layers"][layer]
    if not is_local(rep["model"], layer):
        return "global"
    return "local, window " + bn.js_num(y["window"]) if bn.is_num(y.get("window")) else "local"



def set_select(drv, sel, value):
    drv.execute_script("const s = document.querySelector(arguments[0]); s.value = arguments[1];"
                       "s.dispatchEvent(new Event('change'));", sel, value)


def check_local(drv, name, rep):
    heads, m = rep["heads"], rep["model"]
    local = [is_local(m, h["layer"]) for h in heads]
    view(drv, "overview")
    marked = drv.execute_script("""
const chips = Array.prototype.map.call(document.querySelectorAll('#hs-summary .chip[data-head-index]'),
  c => [+c.dataset.headIndex, c.classList.contains('loc')]);
const cells = Array.prototype.map.call(document.querySelectorAll('#hs-heads tbody tr'),
  r => [+r.dataset.k, r.cells[0].classList.contains('loc')]);
return [chips, cells];""")
    bad = [(heads[k]["id"], on) for k, on in marked[0] + marked[1] if on != local[k]]
    check(not bad, "%s: local-layer marks on the wrong heads (head, marked): %s" % (name, bad[:4]))
    check(len(marked[1]) == len(heads), "%s: %d table rows read for the local marks" % (name, len(marked[1])))
    both = any(local) and not all(local)
    has = bool(by_css(drv, "#hs-layer-kind"))
    check(has == both, "%s: the layers filter is %s, want it %s" % (name, "there" if has else "absent", "there" if both else "absent"))
    if not both:
        return
    for kind in ("local", "global", "all"):
        set_select(drv, "#hs-layer-kind", kind)
        keep = [h for h, loc in zip(heads, local) if kind == "all" or loc == (kind == "local")]
        cs = bn.cards(drv)
        bn.check_types_card(drv, "%s (%s layers)" % (name, kind), rep, keep, cs)
        bn.check_cluster_card(drv, "%s (%s layers)" % (name, kind), rep, keep, cs)
        ids = drv.execute_script("return Array.prototype.map.call(document.querySelectorAll("
                                 "'#hs-types .chip, #hs-clusters .chip'), c => +c.dataset.headIndex);")
        want = {k for k, h in enumerate(heads) if h in keep}
        check(set(ids) <= want, "%s: with %s layers the cards list heads %s" % (name, kind, sorted(set(ids) - want)[:4]))
        bn.sweep(drv, name, "the overview with %s layers" % kind, ["#hs-types", "#hs-clusters", ".layerkind"])
    # the model view's control: the other layers' tiles faded; the overview follows it
    drv.execute_script("window.headscope.show('model');")
    set_select(drv, "#hs-mv-layers", "local")
    out = drv.execute_script("return Array.prototype.map.call(document.querySelectorAll('#hs-grid .tile'),"
                             " t => [+t.dataset.k, t.classList.contains('out')]);")
    bad = [heads[k]["id"] for k, faded in out if faded == local[k]]
    check(len(out) == len(heads) and not bad, "%s: model view with local layers fades %s" % (name, bad[:4]))
    check(drv.execute_script("return document.getElementById('hs-layer-kind').value;") == "local",
          "%s: the overview's layers filter does not follow the model view's" % name)
    set_select(drv, "#hs-mv-layers", "all")
    view(drv, "overview")
